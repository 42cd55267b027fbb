"""The command line's progress lines (reading and writing large files, embedding on Ray)."""

from puaudit.progress import stderr_progress


def test_a_line_per_tenth_and_one_at_the_end(capsys):
    report = stderr_progress("read", min_total=100)
    for done in range(0, 1001, 50):
        report(done, 1000)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"read: {d:,} of 1,000 rows" for d in range(100, 1001, 100)]


def test_uneven_steps_print_once_per_tenth_reached(capsys):
    report = stderr_progress("embedding on Ray", unit="distinct texts")
    for done in (0, 3, 25, 26, 99, 100):
        report(done, 100)
    assert capsys.readouterr().err.splitlines() == [
        "embedding on Ray: 25 of 100 distinct texts", "embedding on Ray: 99 of 100 distinct texts",
        "embedding on Ray: 100 of 100 distinct texts"]


def test_small_or_empty_work_prints_nothing(capsys):
    stderr_progress("read", min_total=500_000)(10, 10)
    stderr_progress("wrote")(0, 0)
    assert capsys.readouterr().err == ""
