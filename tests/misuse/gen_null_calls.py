#!/usr/bin/env python3
"""Generates tests/misuse's null-argument cases from include/tptrain.h.

usage: gen_null_calls.py HEADER OUTPUT.c

For every exported function and every pointer parameter (function pointers
included) it writes one case: the function called with that parameter NULL
and every other parameter a plausible value (live handles of the right type
where the test can make one, options initialised with their INIT macro,
writable buffers for out-parameters). misuse_main.c runs each case in a
forked child under a time limit. A case passes when the call neither crashes
nor hangs and, for a function that returns a status, the status is an error
with a message, unless the parameter is one the header allows to be NULL
(NULLABLE below, each with the header's words). Because the cases come from
the header, a new function is covered as soon as it is declared.
"""
import os
import re
import sys

# Parameters where NULL is a documented, valid value: the call may succeed.
NULLABLE = {
    # user data and its destructor are the caller's business
    "*": {"user_data", "destroy", "deleter", "deleter_ctx"},
    # "options: NULL for the defaults"
    "tpt_trainer_new": {"options"},
    "tpt_tensor_from_data": {"options", "data", "shape"},
    "tpt_tensor_empty": {"options", "shape"},
    "tpt_tensor_zeros": {"options", "shape"},
    "tpt_tensor_full": {"options", "shape"},
    "tpt_input_from_dataflow": {"options"},
    "tpt_input_from_tensors": {"options"},
    "tpt_dataflow_parallel_map": {"options"},
    "tpt_layer_fc": {"options"},
    "tpt_layer_conv2d": {"options"},
    "tpt_layer_conv2d_transpose": {"options"},
    "tpt_tower_variable": {"options"},
    "tpt_status_new": {"message"},
    "tpt_tensor_from_blob": {"options"},   # "options->device must be NULL or cpu": NULL options are the defaults
    "tpt_tensor_to": {"device"},           # "device: NULL keeps the tensor's device"
    "tpt_input_staging": {"device"},       # "NULL: the tower's device"
    "tpt_callback_model_saver": {"options"},          # "options may be NULL (defaults)"
    "tpt_callback_min_saver": {"filename", "dir"},    # "NULL: min-<stat>", "NULL: the log directory"
    "tpt_callback_max_saver": {"filename", "dir"},
    "tpt_model_restore": {"n_restored", "options"},   # "may be NULL", "options may be NULL (defaults)"
    "tpt_predictor_new": {"options"},                 # "options may be NULL (defaults)"
    "tpt_monitor_tensorboard": {"dir"},               # "NULL: the trainer's log directory"
    "tpt_inferencer_scalar_stats": {"prefix"},        # "prefix NULL: validation"
    "tpt_inferencer_classification_error": {"wrong_output", "summary_name"},  # "NULL: wrong", "NULL: validation_error"
    "tpt_callback_stat_monitor_param": {"options"},   # "options may be NULL"
    "tpt_callback_human_hyperparam": {"file"},        # "NULL: hyper.txt"
    "tpt_callback_early_stopping": {"options"},       # "options may be NULL"
    "tpt_callback_terminate_on_nan": {"outputs"},     # "NULL or none: cost"
    "tpt_trainer_set_towers": {"options"},            # "NULL: the defaults"
    "tpt_trainer_set_distributed": {"options"},       # "NULL options: the defaults"
    "tpt_trainer_set_gan": {"options"},               # "NULL: the defaults"
    "tpt_image_grid": {"options"},                    # "`options` may be NULL"
}

# Functions that take no pointer or whose NULL meaning is "no-op" by design
# are still called (a crash is a crash), only their outcome is not checked.
NOT_A_STATUS_CHECK = set()


def strip(src):
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    src = re.sub(r"//[^\n]*", " ", src)
    # drop preprocessor lines (with their continuations)
    src = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", src, flags=re.M)
    return src


def split_params(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return [" ".join(p.split()) for p in out]


def parse_decls(src):
    decls = []
    for m in re.finditer(r"TPT_API\b(.*?);", src, flags=re.S):
        text = " ".join(m.group(1).replace("TPT_NODISCARD", " ").split())
        nm = re.search(r"(\w+)\s*\(", text)
        if not nm:
            continue
        name = nm.group(1)
        ret = text[: nm.start()].strip()
        rest = text[nm.end():]
        depth, i = 1, 0
        while depth:
            if rest[i] == "(":
                depth += 1
            elif rest[i] == ")":
                depth -= 1
            i += 1
        params = [] if rest[: i - 1].strip() in ("", "void") else split_params(rest[: i - 1])
        decls.append((ret, name, params))
    return decls


def param_name_type(p):
    fp = re.match(r"(.*)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)$", p)
    if fp:
        return fp.group(2), p.replace("(*" + fp.group(2) + ")", "(*)").replace("( *" + fp.group(2) + ")", "(*)"), True
    m = re.match(r"(.*?)(\w+)$", p)
    return m.group(2), m.group(1).strip(), False


def read_header(path, seen=None):
    """The header's text with its own "..." includes (the module headers
    under tptrain/) put in place, each once."""
    seen = set() if seen is None else seen
    path = os.path.realpath(path)
    if path in seen:
        return ""
    seen.add(path)
    out = []
    for line in open(path).read().split("\n"):
        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if m:
            out.append(read_header(os.path.join(os.path.dirname(path), m.group(1)), seen))
        else:
            out.append(line)
    return "\n".join(out)


def main():
    header, output = sys.argv[1], sys.argv[2]
    raw = read_header(header)
    src = strip(raw)
    fn_typedefs = {m.group(2): (m.group(1).strip(), m.group(3))
                   for m in re.finditer(r"typedef\s+([^;()]*?)\(\s*\*\s*(\w+)\s*\)\s*\(([^;]*?)\)\s*;", src)}
    struct_types = set(re.findall(r"typedef\s+struct\s+(\w+)\s*\{", src))
    init_macros = set(re.findall(r"#define\s+(TPT_\w+_INIT)\b", raw))
    decls = parse_decls(src)

    lines = ['/* Generated by tests/misuse/gen_null_calls.py from include/tptrain.h: do not edit. */',
             '#include "misuse_common.h"', ""]
    # A dummy for each callback type: never expected to run, harmless if it does.
    for tname, (ret, params) in sorted(fn_typedefs.items()):
        ps = split_params(params)
        named = []
        for k, p in enumerate(ps):
            n, t, _ = param_name_type(p)
            named.append(f"{t} a{k}")
        body = "" if ret == "void" else " return 0;"
        lines.append(f"static {ret} dummy_{tname}({', '.join(named) or 'void'}) {{"
                     + "".join(f" (void)a{k};" for k in range(len(ps))) + body + " }")
    lines.append("")

    handle_makers = {"tpt_tensor": "mk_tensor()", "tpt_datapoint": "mk_datapoint()",
                     "tpt_dataflow": "mk_dataflow()", "tpt_trainer": "mk_trainer()",
                     "tpt_model": "mk_model()", "tpt_optimizer": "mk_optimizer()",
                     "tpt_input": "mk_input()", "tpt_callback": "mk_callback()",
                     "tpt_status": "mk_status()"}

    def value(ptype, pname, is_fp):
        t = ptype
        base = re.sub(r"\bconst\b", "", t).replace("struct", "").strip()
        if is_fp:
            return "NULL"  # a raw function pointer parameter (destroy, deleter): NULL is allowed there
        if base in fn_typedefs:
            return f"dummy_{base}"
        stars = base.count("*")
        core = base.replace("*", "").strip()
        if stars == 0:
            if core in ("double", "float"):
                return "1.0"
            if core in struct_types:
                return f"({t}){{0}}"
            return f"({t})1"
        if pname in ("shape", "dims") and core == "int64_t" and "const" in t:
            return "dims()"  # a shape of 2s: a NULL data pointer then means real elements
        if core == "char" and stars == 1:
            return '"x"' if "const" in t else "(char *)junk()"
        if core == "char" and stars == 2:
            return "(" + t + ")strings()" if "const" in t else "(" + t + ")junk()"
        if core in handle_makers:
            if stars == 1:
                return f"({t}){handle_makers[core]}"
            if stars == 2 and re.search(r"\*\s*const\s*\*", t):  # an array of handles
                return f"({t})one_of({handle_makers[core]})"
            return f"({t})junk()"  # an out-parameter
        if core in struct_types and stars == 1:
            macro = core.upper() + "_INIT"
            if macro in init_macros and "const" in t:
                return f"({t})init_{core}()"
            return f"({t})junk()"
        return f"({t})junk()"

    init_structs = sorted({c for c in struct_types if c.upper() + "_INIT" in init_macros})
    for c in init_structs:
        lines.append(f"static const {c} *init_{c}(void) {{ static {c} v = {c.upper()}_INIT; return &v; }}")
    lines.append("")

    cases = []
    for ret, name, params in decls:
        parsed = [param_name_type(p) for p in params]
        for i, (pname, ptype, is_fp) in enumerate(parsed):
            stripped = re.sub(r"\bconst\b", "", ptype).strip()
            if not (is_fp or "*" in ptype or stripped in fn_typedefs):
                continue
            args = []
            out_slot = False  # an out-handle that must read NULL after the failure
            for k, (n, t, f) in enumerate(parsed):
                if k == i:
                    args.append("NULL" if f else f"({t})NULL")
                elif n == "out" and re.sub(r"\bconst\b", "", t).replace(" ", "").endswith("**"):
                    args.append(f"({t})&slot")
                    out_slot = True
                else:
                    args.append(value(t, n, f))
            nullable = pname in NULLABLE["*"] or pname in NULLABLE.get(name, set())
            fid = f"case_{len(cases)}"
            lines.append(f"static int {fid}(void) {{")
            if out_slot:
                lines.append("  void *slot = SENTINEL;")
            call = f"{name}({', '.join(args)})"
            if ret.replace(" ", "") == "tpt_status*" and not nullable:
                if out_slot:
                    lines.append(f"  int rc = expect_error({call});")
                    lines.append("  return rc == 0 && slot != NULL ? MISUSE_OUT_DANGLING : rc;")
                else:
                    lines.append(f"  return expect_error({call});")
            elif ret == "void":
                lines.append(f"  {call};\n  return 0;")
            elif ret.replace(" ", "") == "tpt_status*":  # NULL allowed: any outcome but a crash
                lines.append(f"  tpt_status_free({call});\n  return 0;")
            else:
                lines.append(f"  (void){call};\n  return 0;")
            lines.append("}")
            cases.append((fid, f"{name}({pname} = NULL)"))
    lines.append("")
    lines.append("const misuse_case null_cases[] = {")
    for fid, label in cases:
        lines.append(f'  {{"{label}", {fid}}},')
    lines.append("};")
    lines.append(f"const size_t n_null_cases = {len(cases)};")
    with open(output, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
