"""Snakemake shim: whether a bug's two arms can run (a checkpoint: no runs for a bug that cannot)."""
from bugimpact import steps

inputs = snakemake.input
steps.run_script(snakemake, steps.arms, bug=snakemake.wildcards.bug,
                 runtime_jsons={arm: inputs[arm] for arm in ("buggy", "corrected") if arm in inputs.keys()},
                 out=snakemake.output[0], reach_json=inputs.get("reach"),
                 gated=snakemake.params.gated,
                 checks={arm: inputs[f"check_{arm}"] for arm in ("buggy", "corrected")
                         if f"check_{arm}" in inputs.keys()})
