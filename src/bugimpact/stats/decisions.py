"""What identical fingerprints decide, before any test: run pairs by seed, where two runs first
differ, the early decision on the first pairs (and its measured repeat), what the identical pairs
prove (``scope``) and which trigger rates they exclude."""
import math

from ..harness.registry import ARMS

FINGERPRINTED = (("init", "parameters at initialisation"),
                 ("epochs", "parameters after every epoch"),
                 ("losses", "every batch's training loss"),
                 ("logits", "test-set log-probabilities"),
                 ("predictions", "test-set predictions"))


def by_arm(records):
    """{arm: {run index: record}} with every status kept."""
    out = {arm: {} for arm in ARMS}
    for rec in records:
        out[rec["spec"]["arm"]][int(rec["spec"]["run"])] = rec
    return out


def fingerprint_sequence(record):
    """(epoch, digest) in the order the run computed them: 0 is initialisation, e the epoch.
    Records from before losses and logits were fingerprinted simply have fewer entries."""
    fp = record["fingerprints"]
    epochs = list(fp["epochs"])
    losses = fp.get("losses") or [None] * len(epochs)
    out = [(0, fp["init"])]
    for e, (loss, params) in enumerate(zip(losses, epochs), start=1):
        out += [(e, loss), (e, params)]
    last = len(epochs)
    return out + [(last, fp.get("logits")), (last, fp["predictions"])]


def first_divergence(a, b):
    """Epoch at which two runs first differ: 0 = at initialisation, e = during epoch e, or None."""
    for (epoch, x), (_, y) in zip(fingerprint_sequence(a), fingerprint_sequence(b)):
        if x != y:
            return epoch
    return None


def fingerprinted(records):
    """What the fingerprints of these records cover, in words."""
    def present(value):
        return bool(value) and (not isinstance(value, list) or None not in value)
    have = set.intersection(*[{k for k, v in r["fingerprints"].items() if present(v)}
                              for r in records])
    return ", ".join(words for key, words in FINGERPRINTED if key in have)


def deterministic_runtime(record):
    env = record.get("environment", {})
    flags = env.get("determinism", {})
    return not record.get("nondeterministic_ops") and flags.get("cudnn_deterministic", False)


def finished_pairs(records, k):
    """The first k (buggy, corrected) run pairs, or None while any of them is missing, failed or
    skipped: a decision on the first k pairs needs all of them."""
    arms = by_arm(records)
    pairs = [(arms["buggy"].get(i), arms["corrected"].get(i)) for i in range(k)]
    if any(a is None or b is None or a["status"] != "ok" or b["status"] != "ok" for a, b in pairs):
        return None
    return pairs


def early_decision(records, k, repeats=None):
    """After the first k paired runs: identical fingerprints run for run on a deterministic runtime
    means the bug is not triggered and the remaining runs can be skipped.

    ``repeats`` (required on CUDA, given as a list): runs made a second time with the same arm and
    seed. Before torch 1.8 nothing reports a non-deterministic kernel, so a flag proves nothing;
    only a measured, bit-identical repeat does."""
    pairs = finished_pairs(records, k)
    if pairs is None:
        return {"decision": "continue", "runs": k, "reason": "a run of the first k did not finish"}
    arms = by_arm(records)
    if not all(deterministic_runtime(r) for pair in pairs for r in pair):
        return {"decision": "continue", "runs": k,
                "reason": "the runtime reported non-deterministic operations"}
    if repeats is not None:
        for again in repeats:
            spec = again.get("spec", {})
            first = arms.get(spec.get("arm"), {}).get(int(spec.get("run", -1)))
            if again.get("status") != "ok" or first is None:
                return {"decision": "continue", "runs": k, "reason": "the repeat run did not finish"}
            if first_divergence(first, again) is not None:
                return {"decision": "continue", "runs": k, "repeat": "differs",
                        "reason": f"{spec['arm']} run {spec['run']} run twice differs from epoch "
                                  f"{first_divergence(first, again)}: this runtime is not "
                                  "deterministic, so identical fingerprints could be luck"}
    diverged = [first_divergence(a, b) for a, b in pairs]
    if all(d is None for d in diverged):
        checked = "; a repeat of the same arm and seed was bit-identical" if repeats else ""
        return {"decision": "not_triggered", "runs": k, "repeat": "identical" if repeats else "",
                "reason": f"fingerprints identical in all {k} run pairs ("
                          f"{fingerprinted([r for pair in pairs for r in pair])}){checked}; "
                          "remaining runs skipped"}
    return {"decision": "continue", "runs": k,
            "reason": f"arms diverge from epoch {min(d for d in diverged if d is not None)}"}


TRIGGER_CONFIDENCE = 0.95


def excluded_rate(pairs, confidence=TRIGGER_CONFIDENCE):
    """The smallest per-run trigger rate that ``pairs`` identical pairs exclude: a trigger firing
    independently in a share x of buggy runs leaves all of them identical with probability
    (1 - x) ** pairs."""
    return 1 - (1 - confidence) ** (1 / pairs)


def pairs_for_rate(rate, confidence=TRIGGER_CONFIDENCE):
    """Identical pairs needed before ``not triggered`` excludes a trigger firing in ``rate`` of runs."""
    return math.ceil(math.log(1 - confidence) / math.log(1 - rate) - 1e-12)


def excluded_text(pairs):
    return (f"a trigger firing in at least {excluded_rate(pairs):.0%} of runs would have shown "
            f"with {TRIGGER_CONFIDENCE:.0%} confidence (rarer, seed-dependent triggers are not "
            f"excluded: set train.early_decision.trigger_rate)")


def scope(ok, common):
    """What identical fingerprints proved: on which device, builds and seeds, and over what."""
    records = [ok[arm][i] for arm in ARMS for i in common]
    envs = [r.get("environment", {}) for r in records]
    devices = sorted({str(e.get("device_name") or e.get("device") or "unknown") for e in envs})
    builds = []
    for arm in ARMS:
        seen = sorted({f"{e.get('torch', '?')} (git {str(e.get('torch_git_version') or '?')[:10]})"
                       for e in (ok[arm][i].get("environment", {}) for i in common)})
        builds.append(f"{arm} torch {', '.join(seen)}")
    return {"device": ", ".join(devices), "builds": "; ".join(builds), "seed_pairs": len(common),
            "fingerprinted": fingerprinted(records) if records else "",
            "cpu_only": all((e.get("device") or "cpu") == "cpu" for e in envs)}


def scope_text(sc):
    return (f"on {sc['device']}; {sc['builds']}; {sc['seed_pairs']} seed pairs; fingerprinted: "
            f"{sc['fingerprinted']}")


def stops(decision):
    """Whether a decision ends its bug's runs: the early decision found it not triggered, or a
    group-sequential look stopped it (impact or futility)."""
    return decision.get("decision") in ("not_triggered", "impact", "futility")
