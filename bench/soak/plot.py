"""One PNG of a soak: requests/s, latency, deliveries, backlog and the CPU split, second by second."""

import math

import matplotlib

matplotlib.use("Agg")  # Files only: no display, whatever the environment says.

from matplotlib import pyplot  # noqa: E402  (after the backend is chosen)

from bench.soak.series import LABELS, PARTS  # noqa: E402

COLOURS = {"api": "#1f77b4", "delivery": "#ff7f0e", "redis": "#d62728", "postgres": "#2ca02c", "bench": "#9467bd",
           "other": "#c7c7c7"}  # fmt: skip


def _nan_free(values: list) -> list:
    return [None if isinstance(v, float) and math.isnan(v) else v for v in values]


def plot(table: list[dict], load_seconds: float, title: str, summary: str, path: str, cores: int) -> None:
    """Draw five panels over one time axis, the load window shaded, and save them to path."""
    seconds = [row["second"] + 0.5 for row in table]  # each row covers [second, second + 1)
    column = lambda name: _nan_free([row[name] for row in table])  # noqa: E731
    # Areas as steps over each whole second: the value at its start, held to the next.
    edges = [row["second"] for row in table] + [table[-1]["second"] + 1]
    steps = lambda name: (values := column(name)) + values[-1:]  # noqa: E731
    figure, axes = pyplot.subplots(5, 1, figsize=(13, 15), sharex=True, constrained_layout=True)
    figure.suptitle(f"{title}\n{summary}", fontsize=11)

    ax = axes[0]
    ax.plot(seconds, column("requests"), color="black", label="all")
    ax.plot(seconds, column("reads"), color="#1f77b4", label="reads (GET)")
    ax.plot(seconds, column("writes"), color="#ff7f0e", label="writes (POST/PATCH/DELETE)")
    ax.set(title="Requests answered per second", ylabel="requests/s")

    ax = axes[1]
    for name, colour, style in (("read_p50_ms", "#1f77b4", "-"), ("read_p99_ms", "#1f77b4", ":"),
                                ("write_p50_ms", "#ff7f0e", "-"), ("write_p99_ms", "#ff7f0e", ":")):  # fmt: skip
        kind, q = name.split("_")[:2]
        ax.plot(seconds, column(name), color=colour, linestyle=style, label=f"{kind}s {q}")
    ax.set_yscale("log")
    ax.set(title="Latency of the requests answered in each second", ylabel="ms (log scale)")

    ax = axes[2]
    ax.plot(seconds, column("produced"), color="#ff7f0e", label="produced (by the writes answered)")
    ax.plot(seconds, column("arrived"), color="#2ca02c", label="arrived at the receiver")
    ax.set(title="Webhook deliveries per second", ylabel="deliveries/s")

    ax = axes[3]
    ax.fill_between(edges, steps("backlog"), color="#d62728", alpha=0.4, step="post", label="produced, not yet arrived")
    ax.set(title="Delivery backlog", ylabel="deliveries")

    ax = axes[4]
    ax.stackplot(edges, *[steps(f"cpu_{p}") for p in PARTS], labels=[LABELS[p] for p in PARTS],
                 colors=[COLOURS[p] for p in PARTS], step="post", alpha=0.85)  # fmt: skip
    ax.axhline(cores, color="black", linestyle="--", linewidth=1, label=f"{cores} cores")
    ax.set(title="CPU split: CPU seconds used per second", ylabel="CPU s/s", xlabel="seconds since the load started")

    for ax in axes:
        ax.axvspan(0, load_seconds, color="#ffe680", alpha=0.35, zorder=0, label="load" if ax is axes[0] else None)
        ax.axvline(load_seconds, color="black", linewidth=0.8, zorder=3)  # the load's end, seen over the CPU stack too
        ax.grid(True, alpha=0.3)
        ax.set_xlim(0, max(edges[-1], load_seconds))
        if ax.get_yscale() == "linear":
            ax.set_ylim(bottom=0)
        # Beside the panel, not on it: the lines run to any corner.
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0)
    figure.savefig(path, dpi=90)
    pyplot.close(figure)
