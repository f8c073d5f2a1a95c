"""What reach claims a fix can affect (``Mapping``, made by ``static``), each answered against a
trace by ``verdict.judge``: an operator with the way to it (``Way``: words, and the functions on
it as a tuple), a backward, Python lines, a binding table, methods and properties of a binding
class, CUDA-only sources, what is entered only through one package, compiled only under a build
setting, not shipped, or unknown with its reason."""
from dataclasses import dataclass, field


class Way(str):
    """How a change reaches an operator: in words (the string itself), and as the functions on the
    way, from the changed one to the operator's own (``functions``), which a trace's record of
    the release's C++ calls is read against (``verdict.judge``) and the arms gate reads (which
    stub a library fills)."""

    def __new__(cls, functions=(), note=""):
        words = " <- ".join(functions)
        way = super().__new__(cls, f"{words} ({note})" if words and note else words or note)
        way.functions = tuple(functions)
        return way


@dataclass
class Mapping:
    python: list = field(default_factory=list)       # (path, [Hunk])
    scopes: dict = field(default_factory=dict)       # path -> {hunk index: [(where, function)]}
    ops: dict = field(default_factory=dict)          # operator -> its Way (a chain of functions)
    backward_ops: dict = field(default_factory=dict)  # operator -> its Way (its backward changed)
    # operator -> operators whose kernels can call it (``Tables.calling_ops``): what may run it
    # below autograd, where a trace cannot tell what the release's C++ called
    carriers: dict = field(default_factory=dict)
    cuda: list = field(default_factory=list)         # CUDA-only files
    cuda_ops: dict = field(default_factory=dict)     # operators of CUDA kernels (reached on cuda)
    cuda_unknown: list = field(default_factory=list)  # what could not be bounded in CUDA sources
    not_shipped: list = field(default_factory=list)
    frontend: list = field(default_factory=list)
    entered: list = field(default_factory=list)      # (path, the Python package it is entered through)
    at_import: list = field(default_factory=list)    # binding tables torch._C reads when it loads
    methods: dict = field(default_factory=dict)      # "Tensor.name" -> why (its binding changed)
    properties: dict = field(default_factory=dict)   # "Tensor.name" (read), "Tensor.name=" (set) -> why
    compiled_under: list = field(default_factory=list)  # (path, the build setting its changes need)
    unknown: list = field(default_factory=list)      # reasons
    tables: str = ""

    def as_dict(self):
        return {"python": [{"path": p, "hunks": len(h), "scopes": self.scopes.get(p, {})}
                           for p, h in self.python],
                "ops": self.ops, "backward_ops": self.backward_ops, "cuda": self.cuda,
                "chains": {op: list(way.functions) for op, way in sorted(self.ops.items())},
                "carriers": {op: sorted(found) for op, found in sorted(self.carriers.items())},
                "cuda_ops": self.cuda_ops, "cuda_unknown": self.cuda_unknown,
                "not_shipped": self.not_shipped,
                "frontend": self.frontend, "entered": [list(e) for e in self.entered],
                "at_import": self.at_import, "methods": self.methods, "properties": self.properties,
                "compiled_under": [list(c) for c in self.compiled_under],
                "unknown": self.unknown, "tables": self.tables}
