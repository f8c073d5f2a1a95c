"""Snakemake shim: step 6, study-wide corrections, Table IV, verdicts and summary."""
from bugimpact import steps

steps.run_script(snakemake, steps.study_stats, study=snakemake.params.study,
                 stats_cfg=snakemake.params.stats, bugs=snakemake.params.bugs,
                 bug_jsons=list(snakemake.input.bugs), funnel_csv=snakemake.input.funnel,
                 out_pvalues=snakemake.output.pvalues, out_verdicts=snakemake.output.verdicts,
                 out_summary=snakemake.output.summary, out_checks=snakemake.output.checks)
