"""Animations of a trajectory as GIF (Pillow, shipped with matplotlib) or MP4 (ffmpeg) with matplotlib."""
from pathlib import Path

import numpy as np


class AnimationError(RuntimeError):
    """The animation cannot be written (e.g. no ffmpeg for MP4); the message says what to do."""


def _legend_labels(segment_module, module_names):
    """The module's name on its first stick, None on the others (one legend entry per module)."""
    seen, labels = set(), []
    for k in segment_module:
        labels.append(None if k in seen else str(module_names[k]))
        seen.add(k)
    return labels


def animate(scene, path, fps=20, max_frames=200, title=None):
    """Write ``scene`` (a :class:`~mrds_jax.viz.scene.Scene`) as an animation to ``path`` (.gif or .mp4):
    sticks per module in 3-D, contact points, and the time. At most ``max_frames`` frames (evenly spaced)."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib import animation

    path = Path(path)
    if path.suffix not in (".gif", ".mp4"):
        raise AnimationError(f"{path}: an animation is written as .gif or .mp4, not {path.suffix!r}")
    if path.suffix == ".mp4" and not animation.writers.is_available("ffmpeg"):
        raise AnimationError(f"{path}: MP4 needs ffmpeg on the PATH (apt-get install ffmpeg); use .gif instead")
    n_t = scene.segments.shape[0]
    frames = np.unique(np.linspace(0, n_t - 1, min(n_t, max_frames)).round().astype(int))
    fig = plt.figure(figsize=(5, 5))
    ax = fig.add_subplot(projection="3d")
    lo, hi = scene.bounds()
    ax.set(xlim=(lo[0], hi[0]), ylim=(lo[1], hi[1]), zlim=(lo[2], hi[2]), xlabel="x (m)", ylabel="y (m)",
           zlabel="z (m)")
    colors = [f"C{k % 10}" for k in scene.segment_module]
    lines = [ax.plot([], [], [], "-o", color=c, lw=2, ms=2, label=label)[0]
             for c, label in zip(colors, _legend_labels(scene.segment_module, scene.module_names))]
    dots = ax.plot([], [], [], "kx", ms=6, label="contact points" if scene.points.shape[1] else None)[0]
    ax.legend(loc="upper left", fontsize=7)
    label = ax.set_title(title or "")

    def draw(i):
        for line, seg in zip(lines, scene.segments[i]):
            line.set_data_3d(seg[:, 0], seg[:, 1], seg[:, 2])
        if scene.points.shape[1]:
            p = scene.points[i]
            dots.set_data_3d(p[:, 0], p[:, 1], p[:, 2])
        label.set_text(f"{title + '   ' if title else ''}t = {scene.t[i]:.3f} s")
        return lines + [dots, label]

    anim = animation.FuncAnimation(fig, draw, frames=frames, blit=False)
    writer = animation.PillowWriter(fps=fps) if path.suffix == ".gif" else animation.FFMpegWriter(fps=fps)
    path.parent.mkdir(parents=True, exist_ok=True)
    anim.save(str(path), writer=writer)
    plt.close(fig)
    return path
