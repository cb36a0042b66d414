"""The plot of a batch of insertions (:func:`plot_insertion`): depth, contact force and actuator force against time."""
import jax
import numpy as np

from .insertion import Insertion


def plot_insertion(runs: Insertion, labels, path):
    """Depth (mm), total contact force on the peg (N) and largest actuator force (N) against time (s) of a batch of
    insertions (an ``Insertion`` with a leading batch axis, one label each), as a PNG at ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = jax.tree.map(np.asarray, runs)
    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    for k, label in enumerate(labels):
        axes[0].plot(runs.t[k], 1e3 * runs.depth[k], label=label)
        axes[1].plot(runs.t[k], np.linalg.norm(runs.contact_force[k], axis=-1), label=label)
        axes[2].plot(runs.t[k], np.abs(runs.forces[k]).max(axis=-1), label=label)
    axes[0].set_ylabel("tip depth below the mouth (mm)")
    axes[1].set_ylabel("total contact force on the peg (N)")
    axes[2].set_ylabel("largest actuator force (N)")
    axes[2].set_xlabel("time (s)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
