"""Why a fix was not studied on a release wheel, as a cause with a name: one table, read by
``bin/corpus --summary`` (which classes each refusal or failure by its words) and written into the
docs (docs/usage.md, "Why a fix is not studied"; a test keeps them one). The first cause whose
words match names it; a refusal no cause matches is ``unnamed``, which the summary counts as a
defect of this table, not as a cause."""
import re

from .registration import REGISTERING

# (name, the words of the refusals or failures it names, what it means)
CAUSES = (
    ("an existing operator's schema changed", r"an existing operator's schema changed",
     "the dispatcher holds one schema per name and overload, and the release's is registered already"),
    ("an operator the arm adds, on a release whose schemas are not registered",
     r"registering a new schema is built for",
     "the library defines a new operator's schema as it registers it on torch 1.4 and 1.5; on other releases an "
     "operator the arm adds is refused (an operator the arm takes away is left registered as the release has it)"),
    ("a binding static to libtorch_python", r"no library takes yet: [^;]*, a binding static to libtorch_python|"
     r"its generated code: the Python bindings' generator",
     "the fix changes the generated Python bindings, compiled into libtorch_python as static functions no "
     "library can take over"),
    ("inline generated-header code", r"no library takes yet: [^;]*changes inline code its includers compile|"
     r"ATen/(templates|core)/(TensorBody|TensorMethods|Tensor)\.h changes ",
     "the fix's generated headers change what includers the library does not rebuild compile (inline code, a "
     "default argument, an overload set)"),
    ("kind", r"^the fix touches |^no: [a-z]+: ",
     "its diff changes a part no override library takes (its part named: codegen, header, jit, ...)"),
    ("comments or declarations only", r"comments only in compiled files",
     "nothing compiled or run differs (comments, or declarations no file that is compiled uses): no arm can"),
    ("a submodule or link", r"a symlink or special file",
     "a submodule bump or a link: a wheel's files are plain files"),
    ("no release source", r"no source of torch",
     "no clone, archive or API holds the release's own files"),
    ("the release changed the fix's lines after it", r"the release changed them after the fix",
     "the later commits that changed them are named"),
    ("the fix builds on changes the release lacks",
     r"the fix builds on changes the release lacks|needs what the release does not have",
     "the arm's code calls what the release does not have"),
    ("the autograd layer's Variable kernels", r"no library takes yet: [^;]*, the autograd layer's Variable kernels",
     "the fix changes the generated Variable kernels (which backward node an operator records), whose "
     "re-registration is not built yet"),
    ("a backward node added or taken away", r"no library takes yet: [^;]*not a node added or taken away",
     "a node's struct in Functions.h changes with it, which every file of the autograd layer compiles"),
    ("a shared header's code named in many files", r"an ABI change with \d+ includers|names nothing its includers use",
     "what a shared header's change touches is named in more files than a library rebuilds, in files no library "
     "rebuilds, or in no name at all (the count and the names given)"),
    ("generated code no library takes yet", r"generated code no library takes yet|TH's generated wrappers",
     "its generated code changes the autograd layer, backward nodes, Python bindings, TH wrappers or other "
     "tensor types' kernels, whose routes are not built yet (the first files named)"),
    ("generated code not made", r"generated code could not be made|generated code is made from the release's tree",
     "the release tree's own generators could not run, or no clone holds the tree"),
    ("no registration on the release", r"no override registration is known",
     f"the release's registration API is not known ({REGISTERING} are), and the fix's kernels must be registered"),
    ("a third-party header", r"a third-party header neither the wheel nor",
     "a rebuilt file needs what a header of a submodule declares, which neither the wheel nor the release's source "
     "holds (no clone of the submodule given: artifacts.onefix.submodules)"),
    ("the host does not compile the release's own file", r"does not compile on this host as the release",
     "the release's own file at its own commit fails to compile on this host: its compiler or flags differ from the "
     "release's build's (named in the build log)"),
    ("the reconstruction is not the release there", r"not what the release was built from|otherwise than its wheel "
     r"was generated|not where \(made before",
     "the release's own file does not compile from the reconstructed source, or its generators write what the arm's "
     "generated code changes otherwise than the wheel's were"),
    ("a header's code its includers compile", r"not declarations only",
     "the header judged by its diff changes code its includers, not rebuilt, would compile otherwise"),
    ("placement", r"does not apply|applies both|not in the release|in the release already|the release does not ship it|"
     r"not in torch [\w.]+'s tree",
     "the fix goes on the release in neither direction, or in both"),
    ("not exported", r"does not export", "the release does not export a function the rebuilt code calls"),
    ("compile", r"compiling .* failed|linking .* failed", "the override library did not build"),
    ("override build", r"override build refused", "the override build refused, with its reason"),
    ("check", r"override check failed", "the override check failed (its reason in the check record)"),
    ("runtime", r"runtime failed|model refused", "the runtime could not be made"),
)
UNNAMED = "unnamed"


def cause_of(text):
    """The name of the cause a refusal's or failure's words give, else ``UNNAMED``."""
    return next((name for name, words, _ in CAUSES if re.search(words, text or "")), UNNAMED)
