"""The tests read Snakemake's own log to see how a job ran (its threads); a checkpoint's job printed
after a rule's is a job of its own, not more fields of the rule's."""
from workflow import logged_jobs

# the order seen in a CI run of test_kernel_fixes_on_torch_1_4_and_1_5..., cut short
LOG = """Execute 1 jobs...
[Sun Nov 29 14:52:30 2026]
localrule runtime:
    input: results/artifacts/onefix-buggy-ace9eeb62093/manifest.json
    output: results/runtimes/venv-py3.7.16-dc0569be/onefix-buggy-ace9eeb62093/runtime.json
    jobid: 12
    threads: 2
    resources: tmpdir=/tmp
Shell command: None
Select jobs to execute...
[Sun Nov 29 14:52:31 2026]
Finished jobid: 12 (Rule: runtime)
Execute 1 jobs...
[Sun Nov 29 14:52:32 2026]
localcheckpoint arms:
    output: results/arms/pr28784/smallcnn-digits-e1-paired-620e3065a0.json
    wildcards: bug=pr28784, key=smallcnn-digits-e1-paired-620e3065a0
DAG of jobs will be updated after completion.
"""


def test_a_checkpoint_after_a_rule_is_a_job_of_its_own():
    jobs = logged_jobs(LOG)
    assert [rule for rule, _ in jobs] == ["runtime", "arms"]
    runtime, arms = (fields for _, fields in jobs)
    assert runtime["output"].endswith("onefix-buggy-ace9eeb62093/runtime.json") and runtime["threads"] == "2"
    assert arms["output"] == "results/arms/pr28784/smallcnn-digits-e1-paired-620e3065a0.json"
