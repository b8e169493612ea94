"""C prototypes of foreign functions: the types hapsira passes, parsed and checked."""

import keyword
import re

F64, I64, PTR = "float64", "int64", "float64 array"
_C_SPELLINGS = {  # C type as written -> kind
    "double": F64,
    "int64_t": I64, "long long": I64, "long long int": I64,
    "signed long long": I64, "signed long long int": I64,
    "const double *": PTR, "double const *": PTR, "double *": PTR,
}
_C_WORDS = {"const", "double", "float", "int", "long", "short", "char", "signed", "unsigned",
            "void", "volatile", "restrict", "int64_t", "int32_t", "uint64_t", "size_t", "bool"}
_PROTOTYPE = re.compile(r"^\s*(?P<ret>[A-Za-z_][\w\s\*]*?)\s*\b(?P<name>[A-Za-z_]\w*)\s*"
                        r"\((?P<params>[^()]*)\)\s*;?\s*$")
_SUPPORTED = "double (float64), int64_t or long long (int64), const double * (a float64 array)"


class _Param:
    def __init__(self, ctype, kind, name):
        self.ctype, self.kind, self.name = ctype, kind, name


def _parse_prototype(prototype):
    """``"double f(double x, const double *p)"`` -> (name, [_Param]); ValueError/TypeError."""
    if not isinstance(prototype, str):
        raise TypeError(f"prototype: expected a C prototype string such as "
                        f"'double density(double h, const double *p)', got {prototype!r}")
    match = _PROTOTYPE.match(prototype)
    if match is None:
        raise ValueError(f"prototype: expected a C prototype such as "
                         f"'double density(double h, const double *p)', got {prototype!r}")
    name, ret = match["name"], " ".join(match["ret"].split())
    if ret != "double":
        raise TypeError(f"prototype {prototype!r}: the return type must be double "
                        f"(a float64), got {ret!r}")
    text = match["params"].strip()
    params = []
    if text not in ("", "void"):
        for position, piece in enumerate(text.split(",")):
            params.append(_parse_param(prototype, position, piece))
    used = set()
    for position, param in enumerate(params):  # Python names for the wrapper
        pyname = param.name or f"arg{position}"
        while keyword.iskeyword(pyname) or pyname in used or pyname.startswith("_"):
            pyname = f"arg{position}" if pyname != f"arg{position}" else pyname + "_"
        used.add(pyname)
        param.name = pyname
    return name, params


def _parse_param(prototype, position, piece):
    tokens = re.findall(r"[A-Za-z_]\w*|\*|\[\s*\]|\S", piece)
    if not tokens:
        raise ValueError(f"prototype {prototype!r}: parameter {position + 1} is empty")
    name = None
    if tokens[-1] == "[]" or re.fullmatch(r"\[\s*\]", tokens[-1]):
        tokens = tokens[:-1] + ["*"]  # `const double p[]` is `const double *p`
        if len(tokens) > 1 and tokens[-2] not in _C_WORDS and tokens[-2] != "*":
            name = tokens.pop(-2)
    elif re.fullmatch(r"[A-Za-z_]\w*", tokens[-1]) and tokens[-1] not in _C_WORDS:
        name = tokens.pop()
    ctype = re.sub(r"(\w)\*", r"\1 *", re.sub(r"\s*\*\s*", "*", " ".join(tokens)))
    if any(not re.fullmatch(r"[A-Za-z_]\w*|\*", t) for t in tokens):
        raise ValueError(f"prototype {prototype!r}: cannot read parameter {position + 1} "
                         f"{piece.strip()!r}")
    kind = _C_SPELLINGS.get(ctype)
    if kind is None:
        raise TypeError(f"prototype {prototype!r}: parameter {position + 1} "
                        f"({piece.strip()!r}) has the unsupported type {ctype!r}; "
                        f"supported: {_SUPPORTED}")
    return _Param(ctype, kind, name)


