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


CIRCLE = 24      # points of a drawn circle


def _circle(radius, z, n=CIRCLE):
    a = np.linspace(0.0, 2 * np.pi, n + 1)
    return np.stack([radius * np.cos(a), radius * np.sin(a), np.full_like(a, z)], axis=1)


def geom_outline(kind, size, side=1.0):
    """Polylines (each (k, 3), in the geom's frame) that outline a collision geom for a line drawing: a box's
    twelve edges, a sphere's three great circles, a cylinder's or capsule's end circles (a capsule's at its
    caps' centres, with its caps' outlines) and four generators, a plane's square ``side`` wide."""
    size = np.asarray(size, float)
    if kind == "box":
        c = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float) * size
        return [c[[i, j]] for i in range(8) for j in range(i + 1, 8) if np.sum(c[i] != c[j]) == 1]
    if kind == "sphere":
        ring = _circle(size[0], 0.0)
        return [ring, ring[:, [2, 0, 1]], ring[:, [0, 2, 1]]]
    if kind in ("cylinder", "capsule"):
        r, h = size[0], size[1]
        lines = [_circle(r, -h), _circle(r, h)]
        lines += [np.array([[r * np.cos(a), r * np.sin(a), -h], [r * np.cos(a), r * np.sin(a), h]])
                  for a in np.linspace(0, 2 * np.pi, 4, endpoint=False)]
        if kind == "capsule":                          # the caps: half circles in two planes through the axis
            a = np.linspace(0.0, np.pi, CIRCLE // 2 + 1)
            for sign in (-1.0, 1.0):
                arc = np.stack([r * np.cos(a), np.zeros_like(a), sign * (h + r * np.sin(a))], axis=1)
                lines += [arc, arc[:, [1, 0, 2]]]
        return lines
    if kind == "plane":
        half = side / 2
        return [np.array([[-half, -half, 0], [half, -half, 0], [half, half, 0], [-half, half, 0], [-half, -half, 0]])]
    return []


def _placed(lines, T, shift=None):
    """``lines`` in the world: x ↦ R x + p of the pose T (4×4), then moved by ``shift``."""
    out = [line @ np.asarray(T[:3, :3]).T + T[:3, 3] for line in lines]
    return out if shift is None else [line + shift for line in out]


def _plane_shift(T, centre):
    """The move along a plane that brings its drawn square under the motion's centre."""
    n, p = np.asarray(T[:3, 2]), np.asarray(T[:3, 3])
    return (centre - np.dot(centre - p, n) * n) - p


def animate(scene, path, fps=20, max_frames=200, title=None):
    """Write ``scene`` (a :class:`~mrds_jax.viz.scene.Scene`) as an animation to ``path`` (.gif or .mp4):
    sticks per module in 3-D, the collision geoms' outlines (:func:`geom_outline`; planes as a square under the
    motion), the contact points that touch, and the time. At most ``max_frames`` frames (evenly spaced)."""
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
    centre, r = scene.extent()
    lo, hi = centre - 1.1 * r, centre + 1.1 * r
    ax.set(xlim=(lo[0], hi[0]), ylim=(lo[1], hi[1]), zlim=(lo[2], hi[2]), xlabel="x (m)", ylabel="y (m)",
           zlabel="z (m)")
    colors = [f"C{k % 10}" for k in scene.segment_module]
    lines = [ax.plot([], [], [], "-o", color=c, lw=2, ms=2, label=label)[0]
             for c, label in zip(colors, _legend_labels(scene.segment_module, scene.module_names))]
    outlines = [(geom_outline(kind, size, 2 * r), kind, poses) for _, kind, size, poses in scene.geoms]
    geom_lines = [[ax.plot([], [], [], "-", color="0.55" if kind != "plane" else "0.75", lw=0.8)[0]
                   for _ in polylines] for polylines, kind, _ in outlines]
    touching = scene.in_contact()
    dots = ax.plot([], [], [], "kx", ms=6, label="contact points" if scene.points.shape[1] else None)[0]
    ax.legend(loc="upper left", fontsize=7)
    label = ax.set_title(title or "")

    def draw(i):
        for line, seg in zip(lines, scene.segments[i]):
            line.set_data_3d(seg[:, 0], seg[:, 1], seg[:, 2])
        for (polylines, kind, poses), drawn in zip(outlines, geom_lines):
            shift = _plane_shift(poses[i], centre) if kind == "plane" else None
            for artist, line in zip(drawn, _placed(polylines, poses[i], shift)):
                artist.set_data_3d(line[:, 0], line[:, 1], line[:, 2])
        if scene.points.shape[1]:
            p = scene.points[i][touching[i]]
            dots.set_data_3d(p[:, 0], p[:, 1], p[:, 2])
        label.set_text(f"{title + '   ' if title else ''}t = {scene.t[i]:.3f} s")
        return lines + [a for drawn in geom_lines for a in drawn] + [dots, label]

    anim = animation.FuncAnimation(fig, draw, frames=frames, blit=False)
    writer = animation.PillowWriter(fps=fps) if path.suffix == ".gif" else animation.FFMpegWriter(fps=fps)
    path.parent.mkdir(parents=True, exist_ok=True)
    anim.save(str(path), writer=writer)
    plt.close(fig)
    return path
