"""Snakemake shim: the self-contained HTML report."""
from bugimpact import steps

steps.run_script(snakemake, steps.report, study=snakemake.params.study,
                 setup=snakemake.params.setup, verdicts=snakemake.input.verdicts,
                 pvalues=snakemake.input.pvalues, summary=snakemake.input.summary,
                 figures=list(snakemake.input.figures), std_png=snakemake.input.std,
                 builds=snakemake.input.builds, out=snakemake.output[0])
