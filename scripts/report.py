"""Snakemake shim: the self-contained HTML report."""
from bugimpact import steps

i = snakemake.input
steps.run_script(snakemake, steps.report, study=snakemake.params.study, setup=snakemake.params.setup,
                 tables={"verdicts": i.verdicts, "pvalues": i.pvalues, "summary": i.summary,
                         "builds": i.builds, "checks": i.checks},
                 figures={"bugs": list(i.figures), "std": i.std}, matrix=list(i.matrix), out=snakemake.output[0],
                 stats_cfg=snakemake.params.stats)
