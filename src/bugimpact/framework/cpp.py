"""Function boundaries in C++ sources, by a small lexer: comments, string and character literals and
preprocessor lines are blanked (newlines kept), then braces are matched.

Why not a real parser (tree-sitter's C++ grammar): ATen's kernels are macro code
(``AT_DISPATCH_*`` with lambdas, ``REGISTER_DISPATCH``, ``TORCH_LIBRARY``), which a grammar without the
macros' expansions parses into error nodes, while what this step needs, "which definition encloses
line L, and which names does it call", only takes brace structure. The lexer runs in pure Python on any
host, and ``tests/test_reach.py`` checks it on ATen itself: every function that
``native_functions.yaml`` dispatches to is found.
"""
import re
from dataclasses import dataclass, field

IDENT = re.compile(r"[A-Za-z_]\w*")
CALL = re.compile(r"([A-Za-z_]\w*)\s*(?:<[^;{}()]*?>\s*)?\(")
# What precedes a called name: a member call (``x.f(``, ``p->f(``) or a dispatched ``at::f(`` goes
# through the dispatcher or an object, not to a function of the same name in ATen/native.
QUALIFIER = re.compile(r"(\.|->|\b(\w+)\s*::)\s*$")
NOT_CALLS = {"if", "for", "while", "switch", "return", "sizeof", "catch", "decltype", "static_assert",
             "alignof", "defined", "noexcept", "throw", "new", "delete", "alignas"}
SCOPE = re.compile(r"\b(namespace|struct|class|union|enum)\b")


@dataclass(eq=False)
class Function:
    name: str                 # the last component: ``add_out`` for ``at::native::add_out``
    start: int                # 1-based line of the head
    end: int                  # line of the closing brace
    calls: set = field(default_factory=set)   # names called directly (not as members, not at::)
    dispatched: set = field(default_factory=set)  # names called through the dispatcher (at::f, x.f)
    static: bool = False      # static, or in an anonymous namespace: invisible outside its file
    owner: str = ""           # the class or struct it is a member of


def blank(text):
    """The source with comments, literals and preprocessor lines replaced by spaces."""
    out, i, n = [], 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#" or (line_start and c in " \t" and text[i:].lstrip(" \t")[:1] == "#"):
            j = i
            while j < n:  # to the end of the line, following backslash continuations
                k = text.find("\n", j)
                if k < 0:
                    k = n
                if text[j:k].rstrip().endswith("\\"):
                    j = k + 1
                    continue
                break
            out.append(re.sub(r"[^\n]", " ", text[i:k]))
            i = k
            continue
        if text.startswith("//", i):
            k = text.find("\n", i)
            k = n if k < 0 else k
            out.append(" " * (k - i))
            i = k
            continue
        if text.startswith("/*", i):
            k = text.find("*/", i + 2)
            k = n if k < 0 else k + 2
            out.append(re.sub(r"[^\n]", " ", text[i:k]))
            i = k
            continue
        if c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if m:
                end = text.find(")" + m.group(1) + '"', i)
                k = n if end < 0 else end + len(m.group(1)) + 2
                out.append(re.sub(r"[^\n]", " ", text[i:k]))
                i = k
                continue
        if c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isalnum()):  # 1'000 separators
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            k = min(j + 1, n)
            out.append(c + " " * (k - i - 2) + c if k - i >= 2 else " " * (k - i))
            i = k
            continue
        out.append(c)
        line_start = c == "\n" or (line_start and c in " \t")
        i += 1
    return "".join(out)


@dataclass(eq=False)
class Initializer:
    """A braced initializer at namespace level: a table (``PyMethodDef methods[] = {...}``), an
    array or a struct, with its line span."""
    head: str                 # what precedes the brace, on one line: ``static PyMethodDef methods[] =``
    start: int
    end: int


def functions(text):
    """Every function definition at namespace or class level, with its line span and the names its
    body calls (lambdas and local classes belong to their enclosing function)."""
    return definitions(text)[0]


def definitions(text):
    """``(functions, initializers)`` of one source, in one pass over its braces."""
    return _walk(text)[:2]


def scopes(text):
    """Each class, struct, union and enum at namespace or class level as (first line, last line,
    name), innermost first where they nest."""
    return sorted(_walk(text)[2], key=lambda s: s[1] - s[0])


def _walk(text):
    """``(functions, initializers, named scopes)`` of one source, in one pass over its braces."""
    code = blank(text)
    found, data, named = [], [], []
    # per open brace: ('scope', anonymous, first line, name), ('function', Function), ('data', Initializer)
    stack = []
    head_start = 0
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            inside = next((s for s in reversed(stack) if s[0] in ("function", "data")), None)
            if inside is None:
                head = code[head_start:i]
                kind = _head_kind(head)
                if kind == "function":
                    name = _name(head)
                    start = _head_line(head, line)
                    anonymous = any(s[0] == "scope" and s[1] is True for s in stack)
                    owners = [s[1] for s in stack if s[0] == "scope" and isinstance(s[1], str)]
                    qualified = re.search(r"(\w+)\s*::\s*~?\w+\s*\($", " ".join(head.split()).split("(")[0] + "(")
                    owner = owners[-1] if owners else (qualified.group(1) if qualified else "")
                    fn = Function(name, start, line, static=bool(re.search(r"\bstatic\b", head))
                                  or anonymous, owner=owner if owner not in ("native", "at") else "")
                    fn._open = i
                    stack.append(("function", fn))
                elif kind == "scope":
                    flat = " ".join(head.split())
                    cls = re.search(r"\b(?:struct|class|union)\s+(?:\w+\s+)*?(\w+)\s*(?:<.*?>\s*)?(?:final\s*)?(?::[^{]*)?$", flat)
                    enum = re.search(r"\benum(?:\s+class)?\s+(\w+)\s*(?::[^{]*)?$", flat)
                    # anonymous namespace: True; a class: its name; a named namespace: False
                    stack.append(("scope", True if re.search(r"\bnamespace\s*$", flat)
                                  else (cls.group(1) if cls and not re.search(r"\bnamespace\b", flat) else False),
                                  line, cls.group(1) if cls else enum.group(1) if enum else None))
                else:
                    flat = " ".join(head.split())
                    stack.append(("data", Initializer(flat, _head_line(head, line), line) if flat else None))
            else:
                stack.append(("inner", None))
            head_start = i + 1
        elif c == "}":
            if stack:
                kind, what, *where = stack.pop()
                if kind == "scope" and where[1]:
                    named.append((where[0], line, where[1]))
                if kind == "function":
                    what.end = line
                    what.calls = direct_calls(code[what._open + 1:i]) | _macro_calls(text[what._open + 1:i])
                    what.dispatched = dispatched_calls(code[what._open + 1:i])
                    del what._open
                    found.append(what)
                elif kind == "data" and what is not None:
                    what.end = line
                    data.append(what)
            if not any(s[0] in ("function", "data") for s in stack):
                head_start = i + 1
        elif c == ";" and not any(s[0] in ("function", "data") for s in stack):
            head_start = i + 1
    return sorted(found, key=lambda f: f.start), sorted(data, key=lambda d: d.start), named


def _head_line(head, line):
    """The line a definition's head starts on, given the line of its opening brace."""
    return line - head.count("\n") + head[:len(head) - len(head.lstrip())].count("\n")


LAUNCH = re.compile(r"([A-Za-z_]\w*)\s*(?:<[^<>;]*>\s*)?<<<")  # a CUDA kernel launch


def direct_calls(body):
    """Names the code calls as free functions: not ``x.f(``, ``p->f(``, ``at::f(`` or keywords."""
    names = set(LAUNCH.findall(body))
    for m in CALL.finditer(body):
        q = QUALIFIER.search(body, max(0, m.start() - 40), m.start())
        if q and (q.group(1) in (".", "->") or q.group(2) in ("at", "torch", "std", "c10")):
            continue
        names.add(m.group(1))
    return names - NOT_CALLS


def dispatched_calls(body):
    """Names the code calls through the dispatcher: ``at::f(``, ``torch::f(`` and a Tensor's methods
    (``x.f(``, ``p->f(``). From a kernel these run below autograd, where the profiles of torch 1.x
    do not look (``Tables.calling_ops``)."""
    names = set()
    for m in CALL.finditer(body):
        q = QUALIFIER.search(body, max(0, m.start() - 40), m.start())
        if q and (q.group(1) in (".", "->") or q.group(2) in ("at", "torch")):
            names.add(m.group(1))
    return names - NOT_CALLS


DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+\w+(?:\([^)]*\))?((?:.*\\\n)*.*)", re.M)


def _macro_calls(body):
    """Names called by the macros a function body defines (``#define HANDLE_CASE(...) f(...)``),
    which blanking the body's preprocessor lines hides: the function that defines them uses them."""
    expansions = "\n".join(m.group(1).replace("\\\n", "\n") for m in DEFINE.finditer(body))
    return direct_calls(blank(expansions)) if expansions else set()


def _head_kind(head):
    flat = " ".join(head.split())
    if not flat or flat.endswith("="):  # an initializer, whatever its type (``static struct T x[] =``)
        return "data"
    if SCOPE.search(flat) and "(" not in flat.split("{")[0].split(SCOPE.search(flat).group(1))[-1]:
        return "scope"
    if re.match(r'^extern\s*" *"$', flat):
        return "scope"
    depth, eq_top = 0, False
    for j, ch in enumerate(flat):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "=" and depth == 0 and flat[j + 1:j + 2] != "=" and flat[j - 1:j] not in ("=", "<", ">", "!"):
            eq_top = True  # an initializer's ``=``, not a comparison (``enable_if_t<N % 2 == 0, T>``)
    if "(" in flat and not eq_top:
        return "function"
    if "(" in flat and re.search(r"\boperator\s*(==|=|<=|>=|!=)", flat):
        return "function"
    return "data"


def _name(head):
    flat = " ".join(head.split())
    m = re.search(r"\boperator\s*(\(\)|[^\s(]+)\s*\(", flat)
    if m:
        return "operator" + m.group(1)
    depth, name = 0, ""
    for j, ch in enumerate(flat):  # the first top-level '(' after a name that is not a macro
        if ch == "(" and depth == 0:
            # a specialisation's template arguments (``interleave2<double>(``) are not its name
            names = IDENT.findall(_without_template_arguments(flat[:j]))
            if names and not re.fullmatch(r"[A-Z0-9_]+", names[-1]):
                return names[-1]
            name = name or (names[-1] if names else "")
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
    return name


def _without_template_arguments(head):
    """``head`` less the template argument list that closes it (``f<double, 2>`` is ``f``)."""
    head = head.rstrip()
    if not head.endswith(">") or head.endswith("->"):
        return head
    depth = 0
    for j in range(len(head) - 1, -1, -1):
        depth += {">": 1, "<": -1}.get(head[j], 0)
        if depth == 0:
            return head[:j]
    return head


def declares(text, lineno, name):
    """Whether line ``lineno`` writes ``name`` only to declare it, in a statement at namespace or
    class level: a prototype (``TORCH_API Tensor f(const Tensor& a) const;``, with a return type
    before the name and nothing assigned) or a using-declaration (``using vec256::f;``). A call
    there (``static auto r = f(x);``, ``REGISTER(f(x));``) runs when the library loads: not one."""
    code = blank(text)
    lines = code.split("\n")
    found = re.search(rf"\b{re.escape(name)}\b", lines[lineno - 1]) if 0 < lineno <= len(lines) else None
    if found is None:
        return False
    start = sum(len(line) + 1 for line in lines[:lineno - 1]) + found.start()
    begin = max(code.rfind(c, 0, start) for c in ";{}") + 1
    end = code.find(";", start)
    statement = " ".join(code[begin:end + 1].split()) if end >= 0 else ""
    if re.fullmatch(rf"using\s+[\w:]*\b{re.escape(name)}\s*;", statement):
        return True
    prototype = re.fullmatch(rf"(?:template\s*<[^;]*?>\s*)?([\w:<>,*&\s]*?[\w>*&])\s*\b{re.escape(name)}\s*"
                             rf"(?:<[^;()]*>\s*)?\(([^;=]*)\)\s*(?:const|noexcept|override|final|\s)*;", statement)
    return bool(prototype) and not re.search(r"\b(return|auto|static_assert)\b", prototype.group(1))


def enclosing(funcs, lineno):
    """The function whose span holds ``lineno``, or None (namespace-level code)."""
    best = None
    for fn in funcs:
        if fn.start <= lineno <= fn.end and (best is None or fn.start >= best.start):
            best = fn
    return best


# each parallel backend torch.__config__.parallel_info() names, and the setting its build defines
PARALLEL_BACKENDS = {"OpenMP": ("AT_PARALLEL_OPENMP",), "native thread pool": ("AT_PARALLEL_NATIVE",),
                     "native thread pool and TBB": ("AT_PARALLEL_NATIVE_TBB",)}
# the preprocessor settings of a build that whole files of ATen are compiled under; the verdict
# reads the traced torch's build for each (``reach.verdict.built_with``)
BUILD_GUARD = re.compile(r"^\s*#\s*if\s+(AT_PARALLEL_NATIVE|AT_PARALLEL_NATIVE_TBB|AT_PARALLEL_OPENMP|"
                         r"AT_MKL_ENABLED\(\)|AT_MKLDNN_ENABLED\(\))\s*(//.*)?$")


def guard_of(src, lines):
    """The build setting every one of the changed ``lines`` (1-based) of ``src`` is compiled under
    (``BUILD_GUARD``, at any depth of its conditionals), or None."""
    stack, under = [], {}
    for n, line in enumerate(src, 1):
        directive = re.match(r"^\s*#\s*(\w+)", line)
        if directive and directive.group(1) in ("if", "ifdef", "ifndef"):
            guard = BUILD_GUARD.match(line)
            stack.append(guard.group(1).replace("()", "") if guard else "")
        elif directive and directive.group(1) in ("else", "elif") and stack:
            stack[-1] = ""  # the other branch: code compiled when the setting is off
        elif directive and directive.group(1) == "endif" and stack:
            stack.pop()
        under[n] = next((g for g in stack if g), None)
    found = {under.get(n) for n in lines}
    return found.pop() if len(found) == 1 else None
