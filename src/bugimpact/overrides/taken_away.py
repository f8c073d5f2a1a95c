"""What an arm that lacks an operator takes away from the release's generated code (the fix
added the operator, and the release that holds the fix is taken back): read line by line from
each generated file (``runs``), and whether all of it is that operator's (``only_theirs``), for
``generated_code.judged``, which then lets the release's file serve the arm."""
import difflib
import re


def runs(before, after):
    """The runs of lines (each a list) the arm's side of a generated file (``after``, as compiled)
    takes away from the release's (``before``), where that is all it does, else None."""
    old, new = ([line for line in text.splitlines() if line.strip()] for text in (before, after))  # blank: nothing
    opcodes = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    if any(tag not in ("equal", "delete") for tag, *_ in opcodes):
        return None
    runs = []
    for tag, i1, i2, _, _ in opcodes:
        # the same deletion, slid past the lines it begins with that the lines after it repeat
        # (the ``}`` or the tail of the definition before it): the run is then the whole block
        while tag == "delete" and i2 < len(old) and old[i1] == old[i2]:
            i1, i2 = i1 + 1, i2 + 1
        if tag == "delete":
            runs.append(old[i1:i2])
    return runs


def only_theirs(taken, lacking):
    """Whether each run of lines the arm takes away (``taken``: ``runs``) is the lacking operators':
    a block (a definition, a class: from the line that opens its braces to the one that closes
    them) whose head names one of them, their node (``AngleBackward``) or binding
    (``THPVariable_angle``), and any other line naming one (an entry of a list of operators:
    ``is_custom_op``'s), or blank. What only the release has is then nothing the arm calls."""
    bases = {n.split(".")[0].lstrip("_") for n in lacking}
    keys = {key(n) for n in lacking}

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
            depth += line.count("{") - line.count("}")
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
