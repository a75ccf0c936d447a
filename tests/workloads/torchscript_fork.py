"""A TorchScript function forks four tasks onto the inter-op pool and
waits for them: its RecordFunction ends on a pool thread."""
import torch

torch.set_num_threads(1)
torch.set_num_interop_threads(2)


@torch.jit.script
def work(x):
    # Long enough (several ms) that model() always reaches its first wait
    # before that task is done, even when the machine is loaded: model()
    # then ends on a pool thread every time. With 20 iterations, about 1
    # run in 10 had one model() whose tasks were all done first, which
    # then ended on its own thread.
    for _ in range(300):
        x = torch.mm(x, x) * 0.5
    return x


@torch.jit.script
def model(x):
    futs = [torch.jit._fork(work, x) for _ in range(4)]
    out = [torch.jit._wait(f) for f in futs]
    return out[0]


x = torch.randn(64, 64)
for _ in range(20):
    model(x)
print("done")
