"""Assemble README.md from the section files in docs/ (run: python docs/build_readme.py)."""

from pathlib import Path

DOCS = Path(__file__).resolve().parent
ORDER = ["_intro.md", "_audit.md", "_leaderboard.md", "_sensitivity.md", "_stronger_encoder.md",
         "encoders.md", "dashboard.md", "trustjudge.md", "annotators.md", "_models.md",
         "_performance.md",
         "transport.md", "safety.md", "_dev.md"]

parts = []
for name in ORDER:
    path = DOCS / name
    if path.exists():
        parts.append(path.read_text(encoding="utf-8").strip() + "\n")
(DOCS.parent / "README.md").write_text("\n".join(parts), encoding="utf-8")
print("README.md:", sum(p.count("\n") for p in parts), "lines")
