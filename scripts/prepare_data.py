"""Snakemake shim: a challenge's official files to a canonical .npz and its hash."""
from bugimpact import steps

steps.run_script(snakemake, steps.prepare_data, data_cfg=snakemake.params.data,
                 challenge=snakemake.wildcards.challenge, out_npz=snakemake.output.npz,
                 out_meta=snakemake.output.meta)
