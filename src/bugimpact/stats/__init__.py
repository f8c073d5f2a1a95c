"""Step 6: statistics, trigger verdicts, figures and the report."""
