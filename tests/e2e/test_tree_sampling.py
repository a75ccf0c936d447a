"""--tree-sample P: BPF keeps whole top-level op trees with probability P
(a per-thread geometric skip count), so every kept tree is complete."""
import math
import os

from harness import PYTHON, ROOT, capture, rebuild_nesting

TINY = os.path.join(ROOT, "tests", "workloads", "tiny_ops.py")


def tiny(tmp_path, name, steps, *opts):
    """The trace of tiny_ops.py --steps steps under rfbpf *opts."""
    return capture(tmp_path, [PYTHON, TINY, "--steps", str(steps)],
                   "--no-table", *opts, name=name, input="go\n")[0]


def shape(node):
    """A tree's structure: its name and its children's shapes, in order."""
    return (node.name, tuple(shape(c) for c in node.children))


def root_shapes(trace):
    roots, violations = rebuild_nesting(trace)
    assert violations == []
    return [shape(r) for rs in roots.values() for r in rs]


def test_kept_trees_are_complete_and_fraction_is_right(tmp_path):
    full = set(root_shapes(tiny(tmp_path, "full", 300)))
    p = 0.1
    trace = tiny(tmp_path, "tree", 5000, "--tree-sample", str(p))
    other = trace["otherData"]
    kept, seen = other["trees_kept"], other["trees_seen"]
    shapes = root_shapes(trace)
    # One root per kept tree, and each with the nesting a full trace has.
    assert len(shapes) == kept
    incomplete = [s for s in shapes if s not in full]
    assert not incomplete, incomplete[:3]
    assert other["drops"] == 0 and other["tree_too_deep"] == 0
    assert seen > 20000
    sigma = math.sqrt(seen * p * (1 - p))
    assert abs(kept - p * seen) <= 4 * sigma, (kept, p * seen, sigma)


def test_tree_sampling_combines_with_sample(tmp_path):
    trace = tiny(tmp_path, "both", 3000, "--tree-sample", "0.5",
                    "--sample", "0.5")
    other = trace["otherData"]
    assert float(other["sample_prob"]) == 0.5
    assert float(other["tree_sample_prob"]) == 0.5
    assert 0 < other["trees_kept"] < other["trees_seen"]
    assert rebuild_nesting(trace)[1] == []
