"""Model win rates and Bradley-Terry strengths four ways (judge, audited, human, PPI)."""
