"""The type stubs name every public attribute of every native class, and
nothing the module lacks."""

import ast
import pathlib

import runlog
import runlog._runlog as native


def stub_classes():
    path = pathlib.Path(runlog.__file__).with_name("_runlog.pyi")
    tree = ast.parse(path.read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    return out


def public(cls):
    return {n for n in vars(cls) if not n.startswith("_") or n in
            ("__iter__", "__next__", "__len__", "__contains__", "__enter__", "__exit__",
                 "__getitem__", "__eq__")}


def test_stubs_match_the_module():
    stubs = stub_classes()
    classes = {n for n in dir(native) if isinstance(getattr(native, n), type)}
    assert set(stubs) == classes
    for name in classes:
        cls = getattr(native, name)
        assert public(cls) == stubs[name] - {"__init__"}, name
    assert set(runlog.__all__) >= classes
