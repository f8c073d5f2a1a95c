"""What a fix changes in compiled code, by the part of the framework each file belongs to
(``framework.paths.part_of``): which parts a release wheel can take as an override library
(``REBUILT_PARTS``), and, for the others, the part named in the refusal.

A compiled fix is isolated on a release wheel by rebuilding the changed files as the release has
them (with the fix applied or reversed) into one library per arm that puts their code over the
release's, each file by the route its part takes (``Route``; a fix of both kinds of file takes both
in one library, as the parts of one fix belong in one arm):

- **registered** (``op``, ``stub``): ATen's native op files define operators; the library
  registers their kernels over the release's, under the key the release's generated code calls.
  A CPU DispatchStub kernel file (``native/cpu``) is compiled for the capability the release
  chooses, with that capability's flags, and its kernels are put into the release's stubs (their
  public CPU pointer, torch 1.x) when the library loads; it needs no registration.
- **interposed** (``th``, ``infra``): TH's and ATen's other own ``.cpp`` files (TensorIterator, the
  backend fallbacks, named-tensor helpers) define exported functions that the release's libraries
  call through their own dynamic symbol table (none of them is linked ``-Bsymbolic``). The library
  is preloaded into the run's process before torch binds (``LD_PRELOAD``), so each exported
  function it defines takes over the release's own calls to it; it exports only those (a version
  script), so its own copies of inline functions take over nothing. What the release inlines or
  hides cannot be reached so: the build names it and refuses.

CUDA kernels (``cuda``, TH's THC half among them) need a CUDA compiler matching the wheel's CUDA
(designed the same way, not driven yet: a CPU fix's CUDA half is left out of CPU runs, a CUDA-only
fix is refused). Code generation that changes no schema (which kernel a key calls, a derivative
formula, the generators' own code) goes with the fix's op files, judged by its generated code
(``generated_code``); ATen's shared headers, by the files that name what they change
(``shared_headers``). Everything else is compiled into code neither route replaces (other code
generation, TorchScript, distributed, the C++ frontend, the headers of c10 and vec256,
infrastructure outside ATen): refused, its part named, and the docker source build stays its route.
A change to comments only changes no binary and is left out.
"""
import difflib
import re
from dataclasses import dataclass

from ..framework import preprocessor
from ..framework.paths import part_of


class Refused(Exception):
    """The fix cannot be isolated on a release wheel; the message says why."""


REBUILT_PARTS = ("op", "stub", "th", "infra")  # built on the host's compiler, for CPU runs
INTERPOSED_PARTS = ("th", "infra")  # preloaded; op files are registered where the release can
# what an interposed library can rebuild: TH's and ATen's own C++, compiled into the release's
# libtorch (torch/csrc, caffe2 and c10 live in other libraries, some of them Python's own)
INTERPOSABLE = re.compile(r"^aten/src/(TH|THNN|ATen)/.*\.(cpp|c)$")
# a slice of generated Variable kernels: an added operator's, registering itself (``generated_slices``)
SELF_REGISTERED = re.compile(r"^torch/csrc/autograd/generated/VariableType")
# TH's generic files are compiled once per scalar type, where a file of their library includes them
GENERIC = re.compile(r"^aten/src/(TH|THNN)/generic/([^/]+)\.(cpp|c)$")
# Why each other part cannot be taken, in a refusal's words.
WHY = {
    "codegen": "code generation (native_functions.yaml, derivatives.yaml, tools/, the .cwrap "
               "declarations): the release's generated code would have to change",
    "jit": "TorchScript", "dist": "distributed (RPC, c10d, NCCL)",
    "cppapi": "the C++ frontend (torch/csrc/api), which Python does not reach",
    "header": "a shared header inlined into many files (vec256, c10, the dispatcher, TypeCast)",
    "infra": "infrastructure outside ATen's and TH's own .cpp files (torch/csrc, caffe2, c10, "
             "headers, the build): an interposed library takes only those",
    "th": "TH code outside its .cpp files (headers inlined into their includers, build files): an "
          "interposed library takes only TH's .cpp files",
    "other": "code outside the Python package's reach (android, ios, binaries)",
    "cuda": "CUDA kernels, which only a CUDA compiler matching the wheel's CUDA builds (not yet "
            "driven here: a CPU kernel fix's CUDA half is left out of CPU runs)",
}
# A fix's part is the first of its files' parts in this order: the hardest decides, and a kernel fix
# with a CUDA half is a CPU kernel fix whose CUDA half only a CUDA compiler builds.
ORDER = ("codegen", "jit", "dist", "cppapi", "header", "infra", "th", "other", "stub", "op", "cuda")
@dataclass(frozen=True)
class Kernels:
    """The compiled part of a fix an override library takes: its part (``fix_part``), its files
    by part (a CUDA half among them, built only by a CUDA compiler) and their diff sections."""
    part: str
    files: dict
    diff: str

    @property
    def built(self):
        """The changed files an override rebuilds on the CPU (op and stub kernel files and their
        headers, or TH and infrastructure files), and the headers placed for them: those whose
        change is declarations only (``only_declarations``), and ATen's shared headers whose code
        the files that name it are rebuilt for (``shared_headers``)."""
        return sorted(p for k in (*REBUILT_PARTS, "declarations", "shared") for p in self.files.get(k, []))

    @property
    def generator_inputs(self):
        """The generator inputs the fix changes (``native_functions.yaml``, the TH declarations,
        the generated headers the tree checks in), whose generated code the arm's library takes
        by registering its kernels (``generated_code``)."""
        return sorted(self.files.get("codegen", []))

    def with_files(self, paths):
        """These kernels with more files to rebuild, each under its part (``shared_headers``)."""
        files = {k: list(v) for k, v in self.files.items()}
        for path in paths:
            files.setdefault(part_of(path), []).append(path)
        rebuilt = [p for k in REBUILT_PARTS for p in files.get(k, [])]
        return Kernels(fix_part(rebuilt)[0] if self.part == "header" and rebuilt else self.part, files, self.diff)

    def route_on(self, registers_operators):
        """How the library puts the rebuilt code over the release's (module doc), on a release that
        can (``registers_operators``: ``registration.registers_operators``) or cannot take
        registered operators: where it cannot, op files are interposed too (the release's own calls
        to their exported ``at::native`` functions are taken over; stubs still go into its stubs)."""
        interposed = INTERPOSED_PARTS + (() if registers_operators else ("op",))
        return Route(REGISTERED * any(self.files.get(k) for k in ("op", "stub") if k not in interposed)
                     + INTERPOSED * any(self.files.get(k) for k in interposed), interposed)


REGISTERED, INTERPOSED = ("registered",), ("interposed",)


class Route:
    """The routes one override library takes (module doc): ``registers`` (op and stub kernel
    files, loaded after torch) and ``interposes`` (TH and infrastructure files, and op files on a
    release whose registration is not known: the library is preloaded), and which parts it
    interposes. Records name it as its words: ``registered``, ``interposed`` or
    ``registered+interposed`` (and the parts, ``interposed_parts``); a record of before routes
    were named is a registered library's."""

    def __init__(self, names, interposed_parts=INTERPOSED_PARTS):
        self.registers = "registered" in names
        self.interposes = "interposed" in names
        self.interposed_parts = tuple(interposed_parts)

    @classmethod
    def read(cls, words, interposed_parts=None):
        return cls(tuple((words or "registered").split("+")), interposed_parts or INTERPOSED_PARTS)

    def __str__(self):
        return "+".join(REGISTERED * self.registers + INTERPOSED * self.interposes)

    def interposing(self):
        """This route with the interposed one too (a generated backward node, ``generated_code``)."""
        return Route(REGISTERED * self.registers + INTERPOSED, self.interposed_parts)

    def interposed(self, path):
        """Whether a rebuilt file is interposed (its part's route), not registered (or self-registered)."""
        return self.interposes and part_of(path) in self.interposed_parts and not SELF_REGISTERED.match(path)


def compile_units(path, files):
    """The files the release compiles for a changed file: a TH generic file is compiled where a
    file of its library includes it, once per scalar type (``THVector.cpp`` includes
    ``generic/THVectorDefault.cpp``, ``THNN/init.cpp`` every ``THNN/generic`` file), so the
    includers are read from ``files`` (path -> bytes, the release's own); any other file is
    compiled itself. Empty where no file of ``files`` includes the generic file."""
    generic = GENERIC.match(path)
    if not generic:
        return [path]
    name = f"generic/{generic.group(2)}.{generic.group(3)}"
    return sorted(p for p, data in files.items()
                  if data and not GENERIC.match(p) and p.startswith(f"aten/src/{generic.group(1)}/")
                  and p.endswith((".cpp", ".c"))
                  and any(n == name or n.endswith("/" + name) for n in preprocessor.included(data)))


def only_comments(path, section):
    """Whether a file's diff section changes nothing but comments, blank lines and whitespace
    between tokens: each hunk's two sides are the same code once its comments are taken out
    (``//`` and block comments in C and C++, trailing ones included; ``#`` in the build's scripts
    and YAML), its literals kept as they are."""
    hash_comments = not path.endswith(C_FAMILY)
    changed = False
    for sides in hunks(section):
        if _code("\n".join(t for t, _ in sides["-"]), hash_comments) != \
                _code("\n".join(t for t, _ in sides["+"]), hash_comments):
            return False
        changed = changed or any(c for side in sides.values() for _, c in side)
    return changed


def hunks(section):
    """Each hunk of a file's diff section as its two sides: ``-`` (before) and ``+`` (after), each
    a list of (line, whether the diff changes it)."""
    sides = {"-": [], "+": []}
    for line in section.splitlines() + ["@@"]:
        if line.startswith("@@"):
            if sides["-"] or sides["+"]:
                yield sides
            sides = {"-": [], "+": []}
        elif line.startswith(("+++", "---", "diff --git", "index ")):
            continue
        elif line[:1] in ("+", "-"):
            sides[line[0]].append((line[1:], True))
        elif line[:1] in (" ", ""):  # a blank context line may have lost its space
            sides["-"].append((line[1:], False))
            sides["+"].append((line[1:], False))


HEADER = (".h", ".hh", ".hpp", ".hxx", ".cuh", ".h.in")  # .h.in: a header CMake configures (THGeneral.h.in)
# what makes a statement more than a declaration of a function with no body: inline code, a
# function pointer (a data member), the preprocessor, names brought in or redefined
NOT_A_DECLARATION = re.compile(r"\b(virtual|inline|constexpr|static|using|typedef|template|operator)\b|"
                               r"\(\s*\*|#|\[\[")
# C linkage (TH's and THC's ``TH_API``: ``extern "C"``)
C_LINKAGE = re.compile(r'(TH_API|THC_API|TH_EXTERNC|extern\s*"C")\b')
# a declared function's name: TH's generic ones are written ``THTensor_(addmm)(...)``, once for
# every scalar type
DECLARED_NAME = re.compile(r"([A-Za-z_]\w*?_\(\w+\)|[A-Za-z_]\w*)\s*\(")


def only_declarations(path, section):
    """Whether a header's diff section changes declarations only (``includer_code``)."""
    return path.endswith(HEADER) and not only_comments(path, section) and not includer_code(section) \
        and any(c for sides in hunks(section) for side in sides.values() for _, c in side)


def includer_code(section, own_files_only=False):
    """What a header's diff section changes that its includers compile, in words, or "" where it
    changes declarations only: every statement it changes, on either side, is a declaration of a
    function with no body (no inline code, no class member, no virtual function, no macro), its
    default arguments the same on both sides (a default is compiled into each caller), each name
    declared once a side (an overload added or taken away can change which one an includer's call
    resolves to) and one on both sides changed in its parameters' names only. A forward declaration
    of a class (``class Foo;``) counts too. Such a header is placed for the fix's own files and
    rebuilds no includer of it. Comments and blank lines are ignored. ``own_files_only``: the
    header is placed for the rebuilt files alone, which compile against it whole as the arm's build
    would (a generated header): an overload or a parameter type then changes only them."""
    statements = {"-": [], "+": []}
    for sides in hunks(section):
        for side in sides:
            statements[side] += _changed_statements(sides[side])
    code = next((text for side in statements.values() for kind, text in side if kind == "code"), None)
    if code is not None:
        return f"code, not a declaration ({code[:80]})"
    kept = {side: [text for kind, text in found if kind == "declaration"] for side, found in statements.items()}
    if own_files_only:  # the release's callers call only what both sides declare, with its defaults
        overloads = [{_shape(re.sub(r"\s*=\s*[^,)]+", "", s)): _defaults(s) for s in kept[side]} for side in "-+"]
        if any(overloads[0][k] != overloads[1][k] for k in set(overloads[0]) & set(overloads[1])):
            return "a default argument, which each caller compiles"
        return ""
    if sorted(d for s in kept["-"] for d in _defaults(s)) != sorted(d for s in kept["+"] for d in _defaults(s)):
        return "a default argument, which each caller compiles"
    declared = {side: {} for side in kept}
    for side, found in kept.items():
        for statement in found:
            name = DECLARED_NAME.findall(statement)[:1]
            # a C function has no overloads: TH's generic ones are declared once per scalar type,
            # under conditions that exclude each other
            if name and declared[side].setdefault(name[0], statement) is not statement \
                    and not C_LINKAGE.match(statement):
                return f"the overloads of {name[0]}"
    retyped = sorted(n for n in set(declared["-"]) & set(declared["+"])
                     if _shape(declared["-"][n]) != _shape(declared["+"][n]))
    return f"the declaration of {retyped[0]}, which its callers compile" if retyped else ""


# an entry of an X-macro list (``_(aten, bitwise_xor) \``: aten_interned_strings.h's symbols)
LIST_ENTRY = re.compile(r"^\s*_\(\s*\w+\s*,\s*\w+\s*\)\s*\\?\s*$")


def only_list_entries(section):
    """Whether a header's diff section only adds or takes away entries of an X-macro list: an
    enumeration every includer numbers alike, the release's libraries with the release's list, so
    an arm keeps the release's (its own code naming an entry the release lacks does not compile)."""
    changed = [line for sides in hunks(section) for side in sides.values() for line, c in side if c]
    return bool(changed) and all(LIST_ENTRY.match(line) for line in changed)


def _changed_statements(lines):
    """The statements of one side of a hunk that hold a changed line, without comments, each as
    (``declaration``, ``forward`` or ``code``, its text) (``includer_code``). A namespace's braces
    are no code; a preprocessor line is; any statement within a function's or an enum's braces is;
    a class's braces are code where a changed line opens or closes them (its layout), its members
    declarations as at the top (a member function with no body, static or not, changes no layout).
    Two kinds of lines are no code of a wheel's build: those under a condition a
    Linux build never takes (MSVC's, Windows', Apple's), and a condition added or taken away with
    all it holds (what it holds is judged): ``framework.preprocessor``."""
    out, stack, statement, changed_here, macro = [], [], "", False, False
    skipped = preprocessor.uncompiled(lines)
    for at, (line, changed) in enumerate(lines):
        if at in skipped:
            continue
        code = " ".join(_code(line, False)) if line.strip() else ""
        if macro or code.startswith("#"):  # the preprocessor: a condition, a macro, an include
            if changed:
                out.append(("code", code[:80]))
            macro = code.endswith("\\")
            continue
        for c in code + "\n":
            if c not in ";{}":
                statement += c
                changed_here = changed_here or (changed and not c.isspace())
                continue
            text = " ".join(statement.split())
            inside = stack[-1][0] if stack else "namespace"
            if c == "{":
                kind = ("namespace" if re.match(r'(namespace\b|extern\s*"C")', text) else
                        "class" if re.match(r"(template\s*<.*>\s*)?(class|struct|union)\b", text) and "(" not in text
                        else "body")
                stack.append((kind, changed_here or changed))
                if kind != "namespace" and (changed_here or changed or inside == "body"):
                    out.append(("code", f"{text} {{"))
            elif c == "}":
                kind, opened_changed = stack.pop() if stack else ("opened before the hunk", False)
                if kind != "namespace" and (changed or opened_changed) and inside != "body":
                    out.append(("code", f"{text} }}".strip()))
            elif (changed_here or changed) and text:
                if inside == "body":
                    out.append(("code", text))
                elif re.fullmatch(r"(class|struct)\s+\w+", text):
                    out.append(("forward", text))
                elif "(" not in text or NOT_A_DECLARATION.search(
                        re.sub(r"^static\s+", "", text) if inside == "class" else text) or not _declared(text):
                    out.append(("code", text))
                else:
                    out.append(("declaration", re.sub(r"^(public|protected|private)\s*:\s*", "", text)))
            statement, changed_here = "", False
    return out


def _declared(text):
    """Whether a statement reads as a function's declaration: a type, then its name, then its
    parameters (not a call, an assignment or a return)."""
    before = text[:text.index("(")]
    words = before.replace("*", " ").replace("&", " ").split()
    return len(words) >= 2 and not re.search(r"[=.]|->", before) and words[0] not in ("return", "throw", "case")


def whole_file_section(before, after):
    """A diff section of one file's two versions whose one hunk holds the whole file, so that every
    statement is read in its scope (``includer_code`` on a hunk alone cannot see the braces it
    begins within)."""
    lines = difflib.unified_diff(before.decode("utf-8", "replace").splitlines(),
                                 after.decode("utf-8", "replace").splitlines(), lineterm="", n=1 << 30)
    return "\n".join(lines) + "\n"


def _defaults(statement):
    return [d.strip() for d in re.findall(r"=\s*([^,)]+)", statement)]


def _shape(statement):
    """A declaration without its parameters' names and its spacing (a parameter's name is the last
    word before a comma, a closing parenthesis or a default)."""
    return re.sub(r"\b\w+\s*(?=[,)=])", "_", statement).replace(" ", "")


C_FAMILY = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".inl", ".mm", ".m",
            ".cwrap")


def _code(text, hash_comments):
    """The code of ``text`` without its comments, as its pieces: the runs of code between literals
    with their whitespace made single spaces, and the literals as they are. A hunk that begins
    within a block comment is known by the comment's end coming before any start."""
    closes, opens = text.find("*/"), text.find("/*")
    if not hash_comments and closes >= 0 and not 0 <= opens < closes:
        text = "/*" + text  # the hunk begins within a block comment: code has no */ of its own
    pieces, code, i, n = [], [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":  # a literal, to its closing quote (an escape skipped) or the end
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            pieces += [" ".join("".join(code).split()), text[i:j + 1]]
            code, i = [], j + 1
        elif hash_comments and c == "#" or not hash_comments and text.startswith("//", i):
            end = text.find("\n", i)
            code.append(" ")
            i = n if end < 0 else end
        elif not hash_comments and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            code.append(" ")
            i = n if end < 0 else end + 2
        else:
            code.append(c)
            i += 1
    return [piece for piece in pieces + [" ".join("".join(code).split())] if piece]


def fix_part(paths):
    """The part of a whole fix from its compiled files' parts (``ORDER``), and the files of each."""
    kinds = {}
    for path in paths:
        kinds.setdefault(part_of(path), []).append(path)
    return next(k for k in ORDER if k in kinds), kinds


def refusal(fix, kinds, cuda_compiler=False):
    """Why a fix of part ``fix`` (``fix_part``) cannot be isolated on a release wheel, naming its
    part and files, or "" when its kernels can be built (a CUDA half too where ``cuda_compiler``)."""
    if fix in INTERPOSED_PARTS:
        files = [p for k in INTERPOSED_PARTS for p in kinds.get(k, [])]
        cannot = [p for p in files if not INTERPOSABLE.search(p)]
        if cannot:
            return _named(part_of(cannot[0]), cannot)
        return ""
    if fix in REBUILT_PARTS or (fix == "cuda" and cuda_compiler):
        return ""
    return _named(fix, kinds[fix])


def _named(fix, files):
    return (f"{fix}: {WHY[fix]} ({', '.join(files[:3])}{', ...' if len(files) > 3 else ''})")
