"""Source run in a fresh Python process to count what ``jetpy.heap`` is for: the minor page
faults of making and dropping 1 MiB buffers (a few at a time, as a bulk reply or a Spark task's
read does). ``churn_faults()`` returns that count for 50 rounds of four buffers (51,200 pages
were each new)."""

CHURN = """
import resource

def churn(rounds):
    for _ in range(rounds):
        bufs = [b"x" * (1 << 20) for _ in range(4)]
        del bufs

def churn_faults():
    churn(3)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    churn(50)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
"""
