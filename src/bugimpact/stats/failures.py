"""Why runs failed, in words: each failed record's exit and last line, and runs that failed alike
named together."""
import signal

from ..failures import cause_line


def grouped(failures):
    """``(arm, run, why)`` as one line per distinct reason: runs that failed alike are named
    together ("buggy runs 0-19, corrected runs 0-19: exit ..."), not repeated."""
    by_reason = {}
    for arm, run, why in failures:
        by_reason.setdefault(why, {}).setdefault(arm, []).append(run)
    lines = []
    for why, arms in by_reason.items():
        named = []
        for arm, runs in arms.items():
            spans, start = [], runs[0]
            for prev, cur in zip(runs, runs[1:] + [None]):
                if cur is None or cur != prev + 1:  # a span ends
                    spans.append(f"{start}" if start == prev else f"{start}-{prev}")
                    start = cur
            named.append(f"{arm} run{'s' if len(runs) > 1 else ''} {', '.join(spans)}")
        lines.append(f"{', '.join(named)}: {why}")
    return lines


# signals another process sends (a user, a scheduler, snakemake stopping its jobs): the run's own
# last line says nothing of why (a run that crashed by itself, SIGSEGV or SIGABRT, says it there)
SENT = {"SIGTERM", "SIGKILL", "SIGINT", "SIGHUP", "SIGQUIT"}


def failure_text(record):
    """Why a run failed, in words: the exit (a signal by its name) and the harness's last line
    (the launcher's own bookkeeping lines say nothing of the failure); for a signal sent from
    outside, who can send it and the run's log, in place of the last line."""
    codes = record.get("exit_codes")
    code = codes[-1] if isinstance(codes, list) and codes else codes
    how = f"exit {codes}"
    if isinstance(code, int) and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = None
        if name in SENT:
            oom = "; the kernel's out-of-memory killer sends it too (`dmesg` says whether it did)" \
                if name == "SIGKILL" else ""
            log = f"; its log: {record['log']}" if record.get("log") else ""
            return (f"killed by {name} (exit {code}), sent from outside the run (a user, the scheduler "
                    f"or snakemake stopping; its own timeout says so){oom}{log}")
        if name:
            how = f"killed by {name} (exit {code})"
    if record.get("failure_class") == "diverged":
        how = "diverged"
    return f"{how}: {cause_line(record.get('log_tail', ''), empty='no output from the harness')}"
