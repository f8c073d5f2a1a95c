"""Compiled fixes isolated on real release wheels, as a user runs them: kernel fixes on torch 1.4.0
and 1.5.1 (Python 3.7 venvs) and the compiled fault control on torch 2.13 (this Python), each with
its override library built by the host's g++ and checked on the study's workload; and the checks
failing for each way an override was seen to go wrong silently.

The 1.x wheels come from PyPI once (753 MB each, into data/cache/wheels, shared with the other
tests); 2.13.0 from the CPU wheel pip is pointed at where one is (else PyPI's)."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, config_with
from workflow import project_copy, runtime_threads, snakemake

from bugimpact import steps
from bugimpact.io import read_csv

pytestmark = pytest.mark.slow
WHEEL_CACHE = str(ROOT / "data" / "cache" / "wheels")
PATCHES = ROOT / "data" / "patches" / "pytorch"
ZERO_STRIDE = ("import sys, ctypes, torch\nctypes.CDLL(sys.argv[1]) if len(sys.argv) > 1 else None\n"
               "try:\n    torch.nn.functional.conv2d(torch.ones(1, 1, 4, 4), torch.ones(1, 1, 2, 2), stride=0)\n"
               "except RuntimeError as exc:\n    print(str(exc).splitlines()[0])\n")


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
    """One object cache for this file's overrides, as the fixes of a release share one in a study:
    pr38674's 1.5.1 objects are compiled once, by the first study, for every check below (each
    compile is keyed by its preprocessed source, so what a check changes is compiled again)."""
    return str(tmp_path_factory.mktemp("objects"))


def study(work, name, fixes, runtime, runs=4, epochs=2):
    config = yaml.safe_load((ROOT / "configs" / "releases.yaml").read_text())
    config.update(study=name, runtime=runtime)
    config["bugs"] = {"from_sheet": False, "controls": {}, "fixes": fixes}
    config["artifacts"]["wheel_cache"] = WHEEL_CACHE
    config["train"].update(runs=runs, epochs=epochs)
    (work / f"{name}.yaml").write_text(yaml.safe_dump(config))
    return f"{name}.yaml"


def gate(work, bug):
    return json.loads(next((work / "results" / "arms" / bug).glob("*.json")).read_text())


def verdicts(work, name):
    return {r["bug"]: r for r in read_csv(work / "results" / name / "stats" / "verdicts.csv")[1]}


def test_kernel_fixes_on_torch_1_4_and_1_5_are_studied_on_their_release_wheels(tmp_path, objects):
    """pr28784 (zero stride, in 1.4.0) and pr38674 (convolution memory, in 1.5.1): each buggy arm is
    the release with Convolution.cpp rebuilt from the release's own source with the fix reversed;
    both checks pass, and the small CNN's training is the release's (neither fix is triggered by it).
    The 1.4.0 buggy arm has the bug itself: a zero stride dies of SIGFPE, where 1.4.0 refuses it."""
    work = project_copy(tmp_path / "p")
    fixes = {bug: {"release": {"source": "pypi", "version": version}, "patch": str(PATCHES / f"{bug}.diff")}
             for bug, version in (("pr28784", "1.4.0"), ("pr38674", "1.5.1"))}
    runtime = {"kind": "venv", "python": "3.7", "object_cache": objects}
    snakemake(work, "--configfile", study(work, "kernels", fixes, runtime, runs=2, epochs=1))  # the same training
    found = verdicts(work, "kernels")
    for bug in fixes:
        checked = gate(work, bug)["override_checks"]["buggy"]
        assert checked["outcome"] == "verified" and checked["faithful_identical"] and checked["canary_entries"] > 0, checked
        assert set(checked["workload_calls"]) >= {"conv2d", "_convolution"}
        assert found[bug]["verdict"] == "not triggered"
        assert "kernels rebuilt from Convolution.cpp (reconstructed)" in found[bug]["scope"]
    manifests = [json.loads(p.read_text()) for p in (work / "results" / "artifacts").glob("onefix-buggy-*/manifest.json")]
    assert len(manifests) == 2
    # an arm carrying kernels compiles them with the job's threads (both of --cores 2); an arm
    # without (the release, or the release holding the fix), one
    threads = runtime_threads(work)
    carries = {a: bool(json.loads((work / "results" / "artifacts" / a / "manifest.json").read_text()).get("kernels"))
               for a in threads}
    assert sum(carries.values()) == 2 and threads == {a: 2 if k else 1 for a, k in carries.items()}, threads
    for manifest in manifests:
        source = manifest["kernels"]["source"]
        assert source["reconstructed"] and source["origin"].startswith(f"reconstructed: torch {source['release']}'s branch point")
        assert manifest["apply"] == "reverse" and manifest["kernels"]["rebuild"] == ["aten/src/ATen/native/Convolution.cpp"]
    runtime = next(p for p in (work / "results" / "runtimes").glob("*/onefix-buggy-*/runtime.json")
                   if json.loads(p.read_text())["probe"]["version"] == "1.4.0")
    record = json.loads(runtime.read_text())
    arm = record["override"]["libraries"]["arm"]["library"]
    # what 1.4.0 keeps to itself (a stub's per-capability kernel pointers) is the release's own
    taken = {entry["how"] for entry in record["override"]["release_locals"]}
    assert taken and taken <= {"call", "value", "null"} and "-Wl,-Bsymbolic" in record["override"]["link_flags"]
    crash = subprocess.run([record["python"], "-c", ZERO_STRIDE, arm], capture_output=True, text=True)
    assert crash.returncode == -8, crash  # SIGFPE: the bug the fix fixed
    release = subprocess.run([record["python"], "-c", ZERO_STRIDE], capture_output=True, text=True)
    assert release.stdout.strip() == "non-positive stride is not supported"


@pytest.mark.long  # 4 minutes: the registered route's override is built and checked in CI by the tests below
def test_the_compiled_fault_control_is_impact(tmp_path):
    """Every study can show that a compiled change is detected: ReLU's CPU kernels rebuilt with a
    cap at 0.5 in the buggy arm, by the very mechanism a kernel fix uses, on torch 2.13."""
    work = project_copy(tmp_path / "p")
    fixes = {"fault-kernel": {"label": "compiled positive control", "release": {"source": "pypi", "version": "2.13.0"},
                              "patch": str(ROOT / "data" / "faults" / "pytorch" / "fault-kernel-relu.diff")}}
    name = study(work, "faultkernel", fixes, {"kind": "venv", "python": sys.executable}, runs=8, epochs=3)
    snakemake(work, "--configfile", name)
    checked = gate(work, "fault-kernel")["override_checks"]["buggy"]
    assert checked["outcome"] == "verified" and checked["faithful_identical"] and checked["workload_calls"] == ["relu"]
    assert checked["canary_entries"] > 0 and not checked["arm_identical"]
    result = verdicts(work, "faultkernel")["fault-kernel"]
    assert result["verdict"] == "impact" and float(result["effect"]) < 0, result
    record = json.loads(next((work / "results" / "runs" / "fault-kernel").glob("*/buggy/0.json")).read_text())
    assert record["override"]["calls"]["relu"] > 0  # each run says its kernels were the rebuilt ones


@pytest.fixture(scope="module")
def pr38674(tmp_path_factory, objects):
    """The buggy arm of pr38674 on 1.5.1, made as the artifact step makes it."""
    from bugimpact.artifacts import interpreters
    folder = tmp_path_factory.mktemp("pr38674")
    info = interpreters.find("3.7")
    config = config_with(**{"artifacts.wheel_cache": WHEEL_CACHE})
    spec = {"source": "onefix", "arm": "buggy", "patch": str(PATCHES / "pr38674.diff"), "python": info,
            "release": {"source": "pypi", "version": "1.5.1"}}
    manifest = steps.artifact(steps.artifact_sources(config), spec, folder / "artifact" / "manifest.json")
    assert manifest["status"] == "ok", manifest
    return folder, info, config, objects


def checked(pr38674, name, monkeypatch, env=None):
    """The arm's runtime (its override built), then its check on the small CNN."""
    folder, info, config, objects = pr38674
    runtime = steps.runtime("venv", folder / "artifact" / "manifest.json", folder / name / "runtime.json",
                            {"interpreter": info, "cache": str(folder / "uv"), "object_cache": objects,
                             "sources": steps.artifact_sources(config)})
    assert runtime.get("status", "ok") == "ok", runtime
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    data = ROOT / "results" / "data"
    if not (data / "digits.npz").exists():
        steps.prepare_data(config["data"], "digits", data / "digits.npz", data / "digits.json")
    out = folder / name / "check.json"
    steps.override_check(config["train"], 20, folder / name / "runtime.json",
                         (data / "digits.npz", data / "digits.json"), "k", "a", out, folder / name / "check.log")
    return json.loads(out.read_text())


def test_the_check_passes_the_override_as_it_is_built(pr38674, monkeypatch):
    result = checked(pr38674, "as-built", monkeypatch, {"TORCH_USE_RTLD_GLOBAL": "1"})
    assert result["outcome"] == "verified" and result["faithful_identical"] and result["canary_entries"] > 0, result


def test_a_kernel_registered_under_a_key_the_release_never_calls_fails_the_check(pr38674, monkeypatch):
    """On 1.5, a kernel of an operator without dispatch: and derivative registered under the CPU key
    is never called: the build "passed" bit-identity with 0 calls before calls were counted."""
    from bugimpact.overrides import registration
    monkeypatch.setattr(registration, "registration_key", lambda op, settings: "CPUTensorId")
    result = checked(pr38674, "wrong-key", monkeypatch)
    assert result["outcome"] == "failed" and result["faithful_identical"]  # bit-identity alone says nothing
    assert "but never through the library: registered under a key the release does not call" in result["reason"]


def test_a_library_without_bsymbolic_under_global_symbols_fails_the_canary(pr38674, monkeypatch):
    """Without -Bsymbolic, where libtorch's symbols are global, the library's calls to its own
    functions ran the release's copies: its calls were counted, its own code never ran."""
    from bugimpact.overrides import release_build as kernels
    monkeypatch.setattr(kernels, "LINK_FLAGS", ("-Wl,--no-undefined",))
    result = checked(pr38674, "no-bsymbolic", monkeypatch, {"TORCH_USE_RTLD_GLOBAL": "1"})
    assert result["outcome"] == "failed" and result["canary_entries"] == 0
    assert "the canary (the rebuilt code, instrumented) never ran" in result["reason"]
    assert result["faithful_calls"]["conv2d"] > 0  # the registration itself was live


def test_a_reconstructed_source_is_named_in_the_manifest(pr38674):
    folder = pr38674[0]
    manifest = json.loads((folder / "artifact" / "manifest.json").read_text())
    source = manifest["kernels"]["source"]
    assert source["reconstructed"] is True and source["fix"].startswith("cherry-picked")
    assert source["origin"].startswith("reconstructed: torch 1.5.1's branch point")
    assert source["branch_point"][:12] in source["origin"] and source["files_same_in_ties"]
    assert Path(manifest["kernels"]["tree"], "release", "aten/src/ATen/native/Convolution.cpp").is_file()


@pytest.mark.long  # 2.5 minutes in CI: its route is built, preloaded and checked there by the fault control of both routes
def test_the_interposed_fault_control_is_impact(tmp_path):
    """The route of TH and infrastructure fixes detects a change: TH's THBlas.cpp rebuilt with every
    float matrix product scaled by 0.1 in the buggy arm, preloaded into torch 1.4.0's processes,
    where the release's own addmm (every nn.Linear) calls its gemm through the symbol table."""
    work = project_copy(tmp_path / "p")
    fixes = {"fault-th": {"label": "compiled positive control, interposed", "release": {"source": "pypi", "version": "1.4.0"},
                          "patch": str(ROOT / "data" / "faults" / "pytorch" / "fault-th-gemm.diff")}}
    name = study(work, "faultth", fixes, {"kind": "venv", "python": "3.7"}, runs=8, epochs=1)
    snakemake(work, "--configfile", name)
    checked = gate(work, "fault-th")["override_checks"]["buggy"]
    assert checked["outcome"] == "verified" and checked["route"] == "interposed" and checked["faithful_identical"], checked
    assert checked["workload_calls"] == ["THFloatBlas_gemm"] and checked["canary_entries"] > 0
    assert not checked["arm_identical"]
    result = verdicts(work, "faultth")["fault-th"]
    assert result["verdict"] == "impact", result
    runtime = next((work / "results" / "runtimes").glob("*/onefix-buggy-*/runtime.json"))
    override = json.loads(runtime.read_text())["override"]
    assert override["route"] == "interposed" and override["registered"] == [] and override["interposed"] > 10
    # the generic file's gemm, once per scalar type; only the float one is on the workload's path
    changed = {f["name"].split("(")[0] for f in override["changed_functions"]}
    assert "THFloatBlas_gemm" in changed and all(re.fullmatch(r"TH\w+Blas_gemm", n) for n in changed), changed


def test_a_fix_of_a_th_file_and_an_op_file_is_one_library_that_interposes_and_registers(tmp_path):
    """Both routes in one library per arm: THBlas.cpp interposed (every float gemm scaled by 0.1 in
    the buggy arm) and Pooling.cpp registered (every 2-d max pool halved), preloaded into torch
    1.4.0's processes. The check sees both halves run (the release's addmm entering the rebuilt
    gemm, max_pool2d called through the library), the faithful build trains as the release does,
    and the library exports only the functions it interposes (no op file's, no inline copy)."""
    work = project_copy(tmp_path / "p")
    fixes = {"fault-both": {"label": "compiled positive control, both routes",
                            "release": {"source": "pypi", "version": "1.4.0"},
                            "patch": str(ROOT / "data" / "faults" / "pytorch" / "fault-th-pool.diff")}}
    name = study(work, "faultboth", fixes, {"kind": "venv", "python": "3.7"}, runs=8, epochs=1)
    snakemake(work, "--configfile", name)
    checked = gate(work, "fault-both")["override_checks"]["buggy"]
    assert checked["outcome"] == "verified" and checked["route"] == "registered+interposed", checked
    assert checked["faithful_identical"] and not checked["arm_identical"] and checked["canary_entries"] > 0
    assert {"max_pool2d", "THFloatBlas_gemm"} <= set(checked["workload_calls"]), checked["workload_calls"]
    assert verdicts(work, "faultboth")["fault-both"]["verdict"] == "impact"
    runtime = next((work / "results" / "runtimes").glob("*/onefix-buggy-*/runtime.json"))
    record = json.loads(runtime.read_text())
    override = record["override"]
    assert [r["op"] for r in override["registered"]] and override["interposed_files"] == ["aten/src/TH/THBlas.cpp"]
    exported = subprocess.run(["nm", "-D", "--defined-only", override["libraries"]["arm"]["library"]],
                              capture_output=True, text=True, check=True).stdout.split()
    assert any(re.fullmatch(r"TH\w+Blas_gemm", name) for name in exported)
    assert not [name for name in exported if "native" in name or name.startswith("_ZNK2at6Tensor")], exported


def test_the_papers_stub_kernel_fix_is_studied_through_the_releases_own_stub(tmp_path):
    """pr32541 (NaN in binary max and min, the paper's), on torch 1.5.0 with no clone (its release
    source shipped beside its diff): BinaryOpsKernel.cpp compiled for the release's AVX2 kernels,
    each of its kernels put into the release's stub when the library loads. Every binary op of
    training (the SGD update's add, mul, ...) then runs the rebuilt kernels, and the faithful build
    still trains as the release does, bit for bit; a model of maxout units calls max, so the
    canary enters the changed kernel."""
    work = project_copy(tmp_path / "p")
    fixes = {"study-pr32541": {"label": "Properly handle NaN in binary max and min (#32541)",
                               "release": {"source": "pypi", "version": "1.5.0"},
                               "patch": str(PATCHES / "study-pr32541.diff")}}
    name = study(work, "stubmax", fixes, {"kind": "venv", "python": "3.7",
                                          "requirements": [str(ROOT / "examples" / "kernel-models")]}, runs=2, epochs=1)
    config = yaml.safe_load((work / name).read_text())
    config["train"]["model"] = "kernelmodels.models:MaxoutCNN"
    (work / name).write_text(yaml.safe_dump(config))
    snakemake(work, "--configfile", name)
    checked = gate(work, "study-pr32541")["override_checks"]["buggy"]
    assert checked["outcome"] == "verified" and checked["faithful_identical"] and checked["arm_identical"], checked
    assert checked["workload_calls"] == ["at::native::(anonymous namespace)::max_elementwise_kernel"]
    runtime = next((work / "results" / "runtimes").glob("*/onefix-buggy-*/runtime.json"))
    override = json.loads(runtime.read_text())["override"]
    assert override["registered"] == [] and {"add_stub", "max_elementwise_stub"} <= {s["stub"] for s in override["stubs"]}
    assert set(override["compiled_with"]) == {"arm kernels", "faithful kernels", "canary kernels"}
    assert "-mavx2" in override["compiled_with"]["arm kernels"]
    assert verdicts(work, "stubmax")["study-pr32541"]["verdict"] == "not triggered"  # digits hold no NaN


CDIST_PROBE = """import sys, ctypes, torch
if len(sys.argv) > 1:
    ctypes.CDLL(sys.argv[1])
torch.manual_seed(0)
x1, x2, w = torch.randn(3, 5, requires_grad=True), torch.randn(1, 5, requires_grad=True), torch.randn(1, 3)
(torch.cdist(x1, x2).t() * w).sum().backward()  # cdist's gradient is w.t(): 3 x 1, its last stride 3
print(" ".join("%.4f" % v for v in x1.grad[:, 0].tolist()))
"""


def release_clone(tmp_path, version="1.4.0", tree="torch-1.4.0-tree.tar.xz"):
    """A git repository of a release's source, as much of it as its fixes' arms read (the code
    generators and their inputs, the fixes' own files and the headers they need that the wheel
    lacks), tagged as the release: made by bin/extract-release-tree from its reconstruction.
    torch-1.4.0-tree: the branch point 35e6c1763e with #31517 placed, and pr26254's files;
    torch-1.5-tree: 1.5.0's and 1.5.1's branch point 5d92a6cc30 with #34794 placed, and
    pr38262's files (pr32062's are the generators')."""
    import tarfile
    repo = tmp_path / f"torch-{version}"
    repo.mkdir()
    with tarfile.open(ROOT / "tests" / "fixtures" / tree) as tar:
        tar.extractall(repo, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(repo)
    for args in (["init", "-q", "-b", "master"], ["add", "-A"], ["commit", "-qm", f"torch {version}"],
                 ["tag", f"v{version}"]):
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True)
    return repo


def kernel_model_study(work, tmp_path, name, bug, label, version, tree, model):
    """A study of one real fix on ``version`` from its release tree's clone, with a model of
    ``examples/kernel-models`` that runs what it changed."""
    fixes = {bug: {"label": label, "release": {"source": "pypi", "version": version},
                   "patch": str(ROOT / "tests" / "fixtures" / f"{bug}.diff")}}
    config_name = study(work, name, fixes, {"kind": "venv", "python": "3.7",
                                            "requirements": [str(ROOT / "examples" / "kernel-models")]},
                        runs=2, epochs=1)
    config = yaml.safe_load((work / config_name).read_text())
    config["artifacts"]["onefix"]["clone"] = str(release_clone(tmp_path, version, tree))
    config["train"]["model"] = f"kernelmodels.models:{model}"
    (work / config_name).write_text(yaml.safe_dump(config))
    snakemake(work, "--configfile", config_name)
    return {arm: json.loads(next((work / "results" / "artifacts").glob(f"onefix-{arm}-*/manifest.json")).read_text())
            for arm in ("buggy", "corrected")}


def test_a_dispatch_entry_fix_is_studied_with_the_arms_kernel_registered_under_the_key_its_code_calls(tmp_path):
    """pr38262 (scatter_add_'s CPU dispatch entry names another kernel, with its op file and the
    TH declarations its CUDA half leaves) made forwards on torch 1.5.1: the release tree's own
    generators say which kernel the key calls, and the library registers the arm's. A model that
    pools features by quadrant with scatter_add_ calls it through the library: verified, the
    faithful build trains as the release does bit for bit, and the fix (a port of CUDA code) is
    not triggered on the CPU."""
    work = project_copy(tmp_path / "p")
    manifests = kernel_model_study(work, tmp_path, "scatter", "pr38262", "port `scatter_add` to ATen (CUDA) (#38262)",
                                   "1.5.1", "torch-1.5-tree.tar.xz", "SegmentPoolCNN")
    generated = manifests["corrected"]["kernels"]["generated"]
    assert generated["operators"] == ["scatter_add_"] and generated["nodes"] == [], generated
    checked = gate(work, "pr38262")["override_checks"]["corrected"]
    assert checked["outcome"] == "verified" and checked["route"] == "registered", checked
    assert checked["faithful_identical"] and "scatter_add_" in checked["workload_calls"], checked
    assert verdicts(work, "scatter")["pr38262"]["verdict"] == "not triggered"


def test_the_papers_derivative_helper_fix_interposes_the_nodes_that_run_it_and_its_arm_diverges(tmp_path):
    """The paper's pr32062 (tensor^tensor's exponent gradient at a zero base: a derivatives.yaml
    formula and its helper in the autograd template, no op file) taken back on torch 1.5.0: the two
    backward nodes that run the helper are interposed from a slice of the generated Functions.cpp,
    and the release's pow Variable kernel serves the arm (it saves all the arm's node reads). A
    model of generalized-mean pooling over ReLU features raises zeros to a learned power: the
    check enters the helper, the faithful build trains as the release does, and every buggy run
    diverges (0 * log(0)) where the release trains: the verdict is the divergence."""
    work = project_copy(tmp_path / "p")
    manifests = kernel_model_study(work, tmp_path, "gem", "pr32062", "Fix tensor^tensor derivative for 0 base entries",
                                   "1.5.0", "torch-1.5-tree.tar.xz", "GeMCNN")
    generated = manifests["buggy"]["kernels"]["generated"]
    assert generated["nodes"] == ["PowBackward1", "PowBackward2"], generated
    assert generated["release_serves"] == ["torch/VariableType_2.cpp"], generated
    checked = gate(work, "pr32062")["override_checks"]["buggy"]
    assert checked["outcome"] == "verified" and checked["faithful_identical"] and not checked["arm_identical"]
    assert checked["diverged"] == {"arm": "loss nan at epoch 1, step 2"}, checked["diverged"]
    assert any(name.endswith("pow_backward_exponent") for name in checked["workload_calls"]), checked["workload_calls"]
    row = verdicts(work, "gem")["pr32062"]
    assert row["verdict"] == "diverges" and "the buggy arm diverged in all 2 runs" in row["reason"], row["reason"]


def test_a_derivative_formula_fix_is_studied_with_its_backward_node_interposed(tmp_path):
    """pr26254 (cdist's gradient when its last dimension is 1: a derivatives.yaml formula, a check
    in its op file and a stride in its stub kernel) taken back on torch 1.4.0, whose source is a
    clone of the release: the release tree's own generators make both arms' backward nodes, the
    one that differs (CdistBackward) is compiled as a slice of Functions.cpp and interposed, in one
    library with the registered op file and the stub kernel. On a workload of learned prototypes
    (cdist forwards and backwards) the check is verified, the faithful build trains as the release
    does bit for bit (with the host compiler made to sum as GCC 7.3 did), and training is not
    triggered; on the bug's own input the arm's gradient is the bug's where the release's is right."""
    work = project_copy(tmp_path / "p")
    fixes = {"pr26254": {"label": "fix cdist gradient computation if first arg is 1xn (#26254)",
                         "release": {"source": "pypi", "version": "1.4.0"},
                         "patch": str(ROOT / "tests" / "fixtures" / "pr26254.diff")}}
    name = study(work, "cdist", fixes, {"kind": "venv", "python": "3.7"}, runs=2, epochs=1)
    config = yaml.safe_load((work / name).read_text())
    config["artifacts"]["onefix"]["clone"] = str(release_clone(tmp_path))
    config["train"]["model"] = "prototypes"
    (work / name).write_text(yaml.safe_dump(config))
    snakemake(work, "--configfile", name)
    manifest = json.loads(next((work / "results" / "artifacts").glob("onefix-buggy-*/manifest.json")).read_text())
    generated = manifest["kernels"]["generated"]
    assert generated["nodes"] == ["CdistBackward"] and generated["operators"] == [], generated
    checked = gate(work, "pr26254")["override_checks"]["buggy"]
    assert checked["outcome"] == "verified" and checked["route"] == "registered+interposed", checked
    assert checked["faithful_identical"] and checked["canary_entries"] > 0
    assert "torch::autograd::generated::CdistBackward::apply" in checked["workload_calls"], checked["workload_calls"]
    row = verdicts(work, "cdist")["pr26254"]
    assert row["verdict"] == "not triggered" and "its generated backward node CdistBackward interposed" in row["scope"]
    runtime = json.loads(next((work / "results" / "runtimes").glob("*/onefix-buggy-*/runtime.json")).read_text())
    override = runtime["override"]
    assert override["release_compiler"] == "GCC 7.3" and "-fno-tree-loop-vectorize" in override["parity"]
    exported = subprocess.run(["nm", "-D", "--defined-only", override["libraries"]["arm"]["library"]],
                              capture_output=True, text=True, check=True).stdout
    assert "_ZN5torch8autograd9generated13CdistBackward5applyEOSt6vectorIN2at6TensorESaIS5_EE" in exported
    assert "_ZNK2at6Tensor" not in exported  # no inline copy of the slice's takes over the release's
    python = str(Path(runtime["python"]))
    (tmp_path / "probe.py").write_text(CDIST_PROBE)
    grads = {}
    for build in ("release", "faithful", "arm"):
        library = [override["libraries"][build]["library"]] if build != "release" else []
        out = subprocess.run([python, str(tmp_path / "probe.py"), *library], capture_output=True, text=True,
                             env={"PATH": "/usr/bin:/bin", **({"LD_PRELOAD": library[0]} if library else {})})
        assert out.returncode == 0, out.stderr[-2000:]
        grads[build] = out.stdout.split()
    assert grads["faithful"] == grads["release"] and grads["arm"] != grads["release"], grads


@pytest.mark.parametrize("minor, written", [("3", "bugimpact::take(\"aten::max_pool2d("),
                                            ("2", "bugimpact::take(\"aten::max_pool2d("),
                                            ("1", "&at::TypeExtendedInterface::max_pool2d)")])
def test_torch_1_1s_to_1_3s_registration_writes_the_kernel_into_its_dispatch_table(tmp_path, minor, written):
    """torch 1.3 keeps most operators on its ATen dispatcher, whose table refuses a second kernel
    for a key: the library writes its kernel into the release's table when it loads (or registers
    it with c10 where 1.3 had moved the operator); 1.2 keeps every operator there (a kernel per
    backend, one for Variables), written alike. Before, 1.2 had no registration, and the 1.3.0
    window's fixes that change generated code and were entangled with 1.3.0 were refused on 1.2.0
    too ("no override registration is known"; pr25313, pr24107, pr19316 among eight). 1.1 calls a
    virtual function of its CPU or Variable Type: the kernel is written into that class's virtual
    table (before, the 1.2.0 window's fixes entangled with 1.2.0 were refused on 1.1.0: pr17031,
    pr17488, pr18648). Pooling.cpp of the release's branch point, every 2-d max pool halved in the
    buggy arm: max_pool2d is called through the library, the faithful build trains as the release
    does, and the arm is impact; every run exits cleanly (1.3's Python warning handler, called at
    exit after Python is gone, once crashed them)."""
    work = project_copy(tmp_path / "p")
    fault = f"fault-pool-1.{minor}"
    fixes = {fault: {"label": f"compiled positive control, torch 1.{minor}'s registration",
                     "release": {"source": "pypi", "version": f"1.{minor}.0"},
                     "patch": str(ROOT / "data" / "faults" / "pytorch" / f"{fault}.diff")}}
    name = study(work, f"faultpool1{minor}", fixes, {"kind": "venv", "python": "3.7"}, runs=8, epochs=1)
    snakemake(work, "--configfile", name)
    checked = gate(work, fault)["override_checks"]["buggy"]
    assert checked["outcome"] == "verified" and checked["route"] == "registered", checked
    assert checked["faithful_identical"] and not checked["arm_identical"]
    assert "max_pool2d" in checked["workload_calls"], checked["workload_calls"]
    assert verdicts(work, f"faultpool1{minor}")[fault]["verdict"] == "impact"
    runtime = json.loads(next((work / "results" / "runtimes").glob("*/onefix-buggy-*/runtime.json")).read_text())
    assert runtime["override"]["torch"] == f"1.{minor}.0"
    registration = (Path(runtime["override"]["libraries"]["arm"]["library"]).parent / "shared" / "register.cpp")
    assert written in registration.read_text()
