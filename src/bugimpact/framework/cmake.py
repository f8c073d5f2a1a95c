"""Build files (``CMakeLists.txt``, ``*.cmake``): whether a change to one is a CUDA build's alone.

A change is a CUDA build's alone where each command it touches lies inside an ``if`` that only a
CUDA build enters (its condition needs one of ``CUDA_OPTIONS``: ``if (USE_NCCL)``) and does
nothing but what CUDA-only code sees (a changed ``if``, ``else`` or ``endif`` changes which
commands of its block run: each of them, then):

- ``list(APPEND|REMOVE_ITEM VAR items)``: every item a CUDA-only source or library (``paths.CUDA``:
  ``${TORCH_SRC_DIR}/csrc/cuda/nccl.cpp``, ``__caffe2_nccl``);
- ``target_link_libraries(target [scope] libraries)``: every library CUDA-only;
- ``target_compile_definitions``, ``add_definitions``, ``add_compile_definitions``: every macro it
  defines tested by the preprocessor only in CUDA-only sources (``#ifdef USE_NCCL``);
- ``if``, ``elseif``, ``else``, ``endif``, ``message``: nothing.

A CUDA wheel running on a CPU still holds what such a build adds, but none of it runs there.
Anything else (``set``, an option, flags, a subdirectory) can change every compiled file.
"""
import re

from .paths import CUDA

# options whose code runs only on a GPU: their sources, kernels and libraries
CUDA_OPTIONS = frozenset(("USE_CUDA", "USE_CUDNN", "USE_NCCL", "USE_SYSTEM_NCCL", "USE_ROCM",
                          "USE_MIOPEN", "USE_NVRTC"))
BUILD_FILE = re.compile(r"(^|/)CMakeLists\.txt$|\.cmake$")
SCOPES = {"PRIVATE", "PUBLIC", "INTERFACE"}
STRUCTURE = {"if", "elseif", "else", "endif", "message"}
DEFINITIONS = {"target_compile_definitions", "add_definitions", "add_compile_definitions"}
WORD = re.compile(r"\w+")


def commands(text):
    """Each command of a CMake file as (name, arguments, first line, last line), comments left
    out; a command's arguments may span lines."""
    out, i, line, n = [], 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        elif c == "#":
            i = text.find("\n", i)
            i = n if i < 0 else i
            continue
        elif c.isalpha() or c == "_":
            name = WORD.match(text, i).group(0)
            j = i + len(name)
            while j < n and text[j] in " \t":
                j += 1
            if j < n and text[j] == "(":
                depth, k, start, quoted = 0, j, line, False
                while k < n:
                    if text[k] == '"' and text[k - 1] != "\\":
                        quoted = not quoted
                    elif not quoted:
                        depth += {"(": 1, ")": -1}.get(text[k], 0)
                    line += text[k] == "\n"
                    if depth == 0:
                        break
                    k += 1
                args = re.sub(r'(?m)#[^"\n]*$', "", text[j + 1:k])  # a comment among the arguments
                out.append((name.lower(), args, start, line))
                i = k + 1
                continue
            i = j
            continue
        i += 1
    return out


def _needs_cuda(condition):
    """The CUDA-only option an ``if`` condition cannot hold without (``USE_NCCL``, ``USE_CUDA AND
    NOT WIN32``), or None (``USE_CUDA OR USE_ROCM`` holds with either)."""
    words = condition.replace("(", " ").replace(")", " ").split()
    if "OR" in words:
        return None
    return next((w.strip("${}") for i, w in enumerate(words)
                 if w.strip("${}") in CUDA_OPTIONS and (i == 0 or words[i - 1] != "NOT")), None)


def cuda_build_only(text, changed, tests_outside_cuda):
    """Whether every changed line (1-based) of a build file lies in a command that only a CUDA
    build runs and that does only what CUDA-only code sees (module doc); ``tests_outside_cuda(macro)``
    says whether any source but a CUDA-only one tests a macro. Returns (the option it is under,
    or None, and why not)."""
    stack, guards, opened, opener, ends = [], [], [], {}, {}
    found = commands(text)
    for i, (name, args, _, _) in enumerate(found):
        if name == "if":
            stack.append(_needs_cuda(args))
            opened.append(i)
        elif name in ("elseif", "else") and stack:
            stack[-1] = _needs_cuda(args) if name == "elseif" else None
        guards.append(next((g for g in reversed(stack) if g), None))
        if name in ("if", "elseif", "else", "endif") and opened:
            opener[i] = opened[-1]  # the if of the block this line belongs to
        if name == "endif" and stack:
            stack.pop()
            ends[opened.pop()] = i
    options = set()
    for n in changed:
        i = next((i for i, (_, _, first, last) in enumerate(found) if first <= n <= last), None)
        if i is None:
            continue  # a blank line or a comment
        name = found[i][0]
        if guards[i] is None:
            return None, f"line {n} ({name}) runs in builds without CUDA too"
        # a changed condition changes which commands of its block run: each must be a CUDA build's
        start = opener.get(i)
        span = range(start, ends.get(start, len(found) - 1) + 1) if start is not None else [i]
        for j in span:
            why = _what_it_does(found[j][0], found[j][1].split(), tests_outside_cuda)
            if why:
                return None, f"line {n}: {why}" + (f" (line {found[j][2]}, in its block)" if j != i else "")
        options.add(guards[i])
    return (" ".join(sorted(options)) or None), ""


def _what_it_does(name, words, tests_outside_cuda):
    """Why a command under a CUDA-only option may change a CPU run, or ""."""
    if name in STRUCTURE:
        return ""
    if name == "list" and words[:1] in (["APPEND"], ["REMOVE_ITEM"]) and words[1:2] and \
            words[1].endswith("DEFINITIONS"):
        return _what_it_does("add_compile_definitions", words[2:], tests_outside_cuda)
    if name == "list" and words[:1] in (["APPEND"], ["REMOVE_ITEM"]):
        items = words[2:]
    elif name == "target_link_libraries":
        items = [w for w in words[1:] if w not in SCOPES]
    elif name in DEFINITIONS:
        macros = [w[2:] if w.startswith("-D") else w for w in words[1 if name.startswith("target") else 0:]
                  if w not in SCOPES]
        tested = [m.split("=")[0] for m in macros if tests_outside_cuda(m.split("=")[0])]
        return f"{name} defines {', '.join(tested)}, which code outside CUDA tests" if tested else ""
    else:
        return f"{name}(), which can change what every file is built with"
    other = [w for w in items if not CUDA.search(w)]
    return f"{name}() names {', '.join(other[:3])}, not CUDA-only" if other else ""
