"""What one side of a fix's generated code has that the other lacks, where that is all they differ
in: an operator the arm lacks (the fix added it, and the release that holds the fix is taken back)
or one it adds (the fix made forwards). Read line by line from each generated file (``runs``),
and whether all of it is those operators' (``only_theirs``), for ``generated_code.judged``: the
release's file then serves an arm that lacks them, and an arm that adds them compiles only its
slices of them (``generated_slices.sliced``)."""
import difflib
import re


def runs(before, after):
    """The runs of lines (each a list) that ``after`` (one side of a generated file, as compiled)
    takes away from ``before`` (the other side), where that is all it does, else None. Called the
    other way round, the runs ``before`` adds."""
    old, new = ([line for line in text.splitlines() if line.strip()] for text in (before, after))  # blank: nothing
    opcodes = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    if any(tag not in ("equal", "delete") for tag, *_ in opcodes):
        return None
    runs = []
    for tag, i1, i2, _, _ in opcodes:
        if tag == "delete":
            runs.append(_whole(old, i1, i2))
    return runs


def _whole(lines, i1, i2):
    """The run ``lines[i1:i2]`` as the whole blocks it takes: the same deletion can be slid along
    the lines it repeats (the ``}`` or the tail of the definition before it, the ``Operator(`` of
    the entry after it); of its places, the first, after sliding forwards, whose brackets balance."""
    places = [(i1, i2)]
    while i2 < len(lines) and lines[i1] == lines[i2]:
        i1, i2 = i1 + 1, i2 + 1
        places.insert(0, (i1, i2))
    i1, i2 = places[-1]
    while i1 > 0 and lines[i1 - 1] == lines[i2 - 1]:
        i1, i2 = i1 - 1, i2 - 1
        places.append((i1, i2))
    return next((lines[a:b] for a, b in places if _balanced(lines[a:b])), lines[places[0][0]:places[0][1]])


def _balanced(run):
    depth = 0
    for line in run:
        depth += _opened(line)
        if depth < 0:
            return False
    return depth == 0


def _opened(line):
    """How many brackets a line opens, less those it closes (braces and parentheses)."""
    return line.count("{") + line.count("(") - line.count("}") - line.count(")")


def only_theirs(taken, operators):
    """Whether each run of lines one side has alone (``taken``: ``runs``) is ``operators``': a
    block (a definition, a class, an entry of TorchScript's table: from the line that opens its
    brackets to the one that closes them) whose head names one of them, their node
    (``AngleBackward``) or binding (``THPVariable_angle``), and any other line naming one (an
    entry of a list of operators: ``is_custom_op``'s), or blank. What only the release has is then
    nothing an arm that lacks them calls; what only the arm has, nothing the release's code
    calls."""
    bases = {n.split(".")[0].lstrip("_") for n in operators}
    keys = {key(n) for n in operators}

    def named(text):  # the operator, its node and what is named after it (its Python class), its binding
        return any(key(t) in keys or any(key(t).startswith(k + "backward") for k in keys)
                   or any(t.lstrip("_") == b or t.endswith("_" + b) for b in bases) for t in re.findall(r"\w+", text))

    def whose(piece):  # a piece with words is theirs where its head (to its opening brace) names one
        opened = next((i for i, line in enumerate(piece) if "{" in line), len(piece) - 1)
        return not re.search(r"\w", "".join(piece)) or named(" ".join(piece[:opened + 1]))

    for run in taken:
        piece, depth = [], 0
        for line in run:
            piece.append(line)
            depth += _opened(line)
            # a piece ends where a statement, a block or a comment does; a head goes on to its brace
            if depth <= 0 and (line.rstrip().endswith((";", "}", ",")) or line.lstrip().startswith(("//", "#"))):
                if depth < 0 or not whose(piece):
                    return False
                piece, depth = [], 0
        if piece and (depth or not whose(piece)):
            return False  # a block left open, or what is not theirs
    return True


def key(name):
    """An operator's or backward node's name as compared (``PowBackward1``, ``pow.Tensor_Scalar``
    and ``_pow`` are all ``pow``)."""
    return re.sub(r"Backward\d*$", "", name.split(".")[0]).replace("_", "").lower()
