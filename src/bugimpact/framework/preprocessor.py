"""What the preprocessor of a Linux wheel's build does with a C or C++ source: the files its
``#include`` lines name (and which of them the compiler or the system has), and which of its
lines it never compiles, read from a diff's hunk alone (its conditions within the hunk)."""
import re

# a condition only another platform's compiler takes: a wheel for Linux compiles nothing under it
_OTHER = r"\(?\s*defined\s*\(?\s*(?:_MSC_VER|_WIN32|_WIN64|__MINGW32__|__APPLE__)\s*\)?\s*\)?"
OTHER_PLATFORM = re.compile(rf"\s*\(?\s*{_OTHER}(?:\s*\|\|\s*{_OTHER})*\s*\)?\s*")
CONDITION = re.compile(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)")

INCLUDE = re.compile(rb'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def included(data):
    """The names a C or C++ file's ``#include`` lines name (bytes in, text out), in order."""
    return [m.decode("utf-8", "replace") for m in INCLUDE.findall(data or b"")]


def system_header(name):
    """A header of the C++ library, the system or the compiler's intrinsics (``<vector>``,
    ``<sys/mman.h>``, ``<immintrin.h>``, ``<arm_neon.h>``): the compiler has it, or, for another
    machine's, the code around it is not compiled here."""
    return ("." not in name or name.startswith(("sys/", "linux/", "bits/")) or name in SYSTEM_HEADERS
            or bool(re.match(r"^\w*intrin\.h$", name)))


SYSTEM_HEADERS = {"math.h", "stdlib.h", "string.h", "stdio.h", "stdint.h", "limits.h", "float.h",
                  "assert.h", "errno.h", "unistd.h", "fcntl.h", "pthread.h", "dlfcn.h", "omp.h",
                  "cpuid.h", "stddef.h", "time.h", "signal.h", "execinfo.h", "cxxabi.h", "malloc.h",
                  "inttypes.h", "arm_neon.h", "altivec.h", "spe.h", "vecintrin.h", "stdarg.h", "wchar.h",
                  "ctype.h", "locale.h", "setjmp.h", "stdbool.h", "complex.h", "fenv.h", "wctype.h",
                  "stdalign.h", "stdatomic.h", "sched.h", "dirent.h", "netdb.h", "poll.h", "link.h",
                  "elf.h", "getopt.h", "libgen.h", "memory.h", "strings.h", "syslog.h", "termios.h"}


def uncompiled(lines):
    """The indexes of one hunk side's lines (each ``(text, whether the diff changes it)``) a
    wheel's build compiles nothing of, for the judge of a header's diff (``overrides.parts``): the
    lines under a branch only another platform takes (``#if defined(_MSC_VER)``,
    ``#ifdef _WIN32``; its ``#else`` is taken), and the condition lines of a block the diff adds
    or takes away whole (each of its lines changed), whose contents are judged as they are."""
    out, open_blocks, never = set(), [], []
    for at, (line, _) in enumerate(lines):
        found = CONDITION.match(_strip_comment(line))
        directive, rest = found.groups() if found else ("", "")
        if directive in ("if", "ifdef", "elif"):
            expression = "defined(%s)" % rest.strip() if directive == "ifdef" else rest
            if directive == "elif" and never:
                never.pop()
            never.append(bool(OTHER_PLATFORM.fullmatch(expression)))
            if directive != "elif":
                open_blocks.append(at)
        elif directive == "ifndef":
            never.append(False)
            open_blocks.append(at)
        elif directive == "else" and never:
            never[-1] = False
        elif directive == "endif":
            never = never[:-1]
            start = open_blocks.pop() if open_blocks else None
            if start is not None and all(c for _, c in lines[start:at + 1]):
                out |= {i for i in range(start, at + 1) if CONDITION.match(_strip_comment(lines[i][0]))}
        if any(never) and not directive:
            out.add(at)
    return out


def _strip_comment(line):
    return re.sub(r"/\*.*?\*/|//.*", "", line)
