import gc
import os
import shutil
import sysconfig
import tempfile
from pathlib import Path

# Tests compile many programs and run most of them a few times, so compile time is the suite's time: cheaper XLA
# backend optimisation halves it, and XLA:CPU's older loop-fusion emitters (instead of its MLIR fusion emitters)
# take 35-45 % off what is left (measured 2026-11-26 on jaxlib 0.10.2: the Pinocchio comparison's UR5 program,
# 44k HLO lines, 9.2-9.6 s -> 5.5-6.9 s of XLA compilation). Both are code-generation choices, not numerics the
# tests check: the compiled-structure checks (test_backend_flags.py) run in fresh interpreters without them. The
# command line's child processes and the notebooks' kernels inherit them.
TEST_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"
os.environ.setdefault("XLA_FLAGS", TEST_XLA_FLAGS)

# One persistent XLA cache per test run, fresh, shared by the run's processes: the pytest-xdist workers (which
# inherit this environment from the controller that made it), the command-line tool's child processes and the
# notebooks' kernels. A program compiled by one of them is read back by the others instead of compiled again,
# and no run reads or writes the user's cache (the command line's default, ~/.cache/mrds_jax/xla), so a run's
# time is a fresh machine's. The controller removes it when the run ends (pytest_unconfigure).
_MADE_CACHE = "MRDS_TEST_XLA_CACHE" not in os.environ
if _MADE_CACHE:
    os.environ["MRDS_TEST_XLA_CACHE"] = tempfile.mkdtemp(prefix="mrds-jax-test-xla-")
os.environ["MRDS_JAX_CACHE"] = os.environ["MRDS_TEST_XLA_CACHE"]           # the command line's --cache-dir default

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

from mrds_jax.console import enable_compilation_cache  # noqa: E402

# the folder the command line itself uses under that base: in-process tests, child processes and the tool share it
os.environ["JAX_COMPILATION_CACHE_DIR"] = str(enable_compilation_cache(os.environ["MRDS_TEST_XLA_CACHE"]))

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import crash_retry  # noqa: E402

ROBOTS = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
URDFS = {
    "ur5": ROBOTS / "ur_description" / "urdf" / "ur5_robot.urdf",
    "panda": ROBOTS / "panda_description" / "urdf" / "panda.urdf",
}


# The full mode: MRDS_SLOW=1 runs the tests marked ``slow`` too; without it they are skipped, so the README's
# test command takes minutes. CI (.ci/run) runs both modes. A test is ``slow`` by its own mark or by this list:
# the checks whose compilation costs the most (measured with --durations on the 2-core machine), each of whose
# properties the default run still touches on a smaller case (noted). docs/checks.md describes the split.
FULL_MODE = os.environ.get("MRDS_SLOW", "") not in ("", "0")
FULL_MODE_ONLY = {
    # contact (issue 34): the gradient checks beyond the sliding box (the stick-slip switch under vmap, the stool's
    # foot forces, the sphere's touch-down), the stacked cubes, the dt -> 0 convergence and the run's scene
    "tests/test_contact_gradients.py::test_gradient_is_finite_at_the_stick_slip_switch_and_batches",
    "tests/test_contact_gradients.py::test_stool_foot_forces_gradient_in_body_mass",
    "tests/test_contact_gradients.py::test_dropped_sphere_rest_height_gradient_in_radius_through_touch_down",
    "tests/test_contact_step.py::test_two_stacked_cubes_rest",
    "tests/test_contact_step.py::test_velocity_level_motion_converges_to_the_exact_one_as_dt_goes_to_zero",
    "tests/test_contact_step.py::test_contact_forces_active_set_and_scene_of_a_run",
    # the contact gradient through a rollout (the default run keeps the solve's implicit derivative under the
    # narrow phase's derivative checks, tests/test_collision_narrowphase.py, and every contact physics check), the
    # ready-made contact scenes' simulations (their files are still built and checked: test_friction_grasp's
    # ready-made file, test_system_files' bad geometry), the MuJoCo outer bound (the narrow phase against MuJoCo stays)
    "tests/test_contact_gradients.py::test_sliding_box_travel_gradient_in_friction_and_slope",
    "tests/test_contact_scenes.py::test_quadruped_stands_by_friction_with_its_weight_on_its_feet",
    "tests/test_contact_scenes.py::test_pushed_quadruped_stands_below_the_friction_limit_and_slides_above_it",
    "tests/test_contact_scenes.py::test_box_incline_runs_through_check_and_simulate",
    "tests/test_friction_grasp.py::test_grasp_holds_when_the_squeeze_is_enough",
    "tests/test_friction_grasp.py::test_grasp_slips_when_the_squeeze_is_not_enough",
    "tests/test_friction_grasp.py::test_grasp_releases_and_regrasps_on_a_schedule",
    "tests/test_contact_mujoco.py::test_rigid_table_lands_like_mujoco",
    # the tree solve's gradient (its values against numpy on four tree shapes stay), two notebooks' fast modes
    # (their full modes run there; the other notebooks' fast modes stay), the mass matrix of two random trees
    # (UR5, Panda and the free-base tree stay, and ABA of the same two trees)
    "tests/test_dense_linalg.py::test_tree_spd_solve_gradient_equals_central_differences",
    "tests/test_notebooks.py::test_notebook_executes[ckcm_design_optimisation.ipynb-fast]",
    "tests/test_notebooks.py::test_notebook_executes[contact_monte_carlo.ipynb-fast]",
    "tests/test_tree_vs_pinocchio.py::test_mass_matrix[branching]",
    "tests/test_tree_vs_pinocchio.py::test_mass_matrix[prismatic_screw_spherical]",
    # design optimisation: the multibody model's gradients (the paper model's stay), L-BFGS, the simulated optimum,
    # the killed-and-resumed command line (resume and damaged-file checks stay)
    "tests/test_ckcm_design.py::test_gradients_match_central_differences[multibody]",
    "tests/test_ckcm_design.py::test_gradient_signs_agree_with_nguyen_figs_8_to_11[multibody]",
    "tests/test_ckcm_design.py::test_simulated_design_applies_the_inverse_dynamics_forces",
    "tests/test_ckcm_design.py::test_lbfgs_reaches_the_adam_optimum",
    "tests/test_ckcm_design.py::test_command_line_killed_mid_block_resumes_bit_identical",
    # level-scan recursions: the full unrolled-vs-scan comparison and its ABA gradient (Talos and the mixed
    # random tree against Pinocchio stay)
    "tests/test_tree_scan.py::test_level_scan_equals_unrolled",
    "tests/test_tree_scan.py::test_aba_gradient_on_level_scan_matches_central_differences",
    "tests/test_deadlock_guard.py::test_batched_paths_do_not_hang",
    # notebooks: the design notebook runs in fast mode by default; all four run fast and full in the full mode
    "tests/test_notebooks.py::test_notebook_executes[ckcm_monte_carlo.ipynb-fast]",
    "tests/test_notebooks.py::test_notebook_executes[ckcm_end_effector.ipynb-fast]",
    "tests/test_notebooks.py::test_notebook_executes[flexible_links.ipynb-fast]",
    "tests/test_lanewise.py::test_closed_chain_rollout_with_the_rewritten_step_matches_the_plain_rollout",
    # Lilly & Orin's path: the Stewart platform, library tips and the singular fallback stay
    "tests/test_lilly.py::test_lilly_gradients_equal_general_path_and_finite_differences",
    "tests/test_lilly.py::test_lilly_equals_mrds_dual_arm_grasp",
    "tests/test_lilly.py::test_quadruped_on_point_contacts_general_path",
    "tests/test_lilly.py::test_simulate_auto_path_equals_general_path",
    # compiled-program structure: the Stewart general-path step stays
    "tests/test_backend_flags.py::test_compiled_step_has_no_ynn_fusion_no_custom_call_and_few_kernels[dual_arm-general]",
    "tests/test_backend_flags.py::test_compiled_step_has_no_ynn_fusion_no_custom_call_and_few_kernels[stewart-auto]",
    # Table 17 blocks: the Type B four-bar stays
    "tests/test_constraint_space.py::test_table17_blocks_equal_constraint_jacobian_route[stewart]",
    "tests/test_constraint_space.py::test_table17_blocks_equal_constraint_jacobian_route[dual_arm]",
    "tests/test_system_vs_pinocchio.py::test_stewart_inverse_dynamics_recovers_actuator_and_constraint_forces",
    "tests/test_mjcf_vs_pinocchio.py::test_mjcf_loop_equals_pinocchio_constraint_dynamics"
    "[dual_arm_grasp-2-kinds1-False]",
    "tests/test_integration_module.py::test_free_floating_tree_conserves_momentum_and_energy",
    "tests/test_hard_mechanisms.py::test_parallelogram_chain_through_singular_configurations_default_settings",
    "tests/test_hard_mechanisms.py::test_dopri5_reaches_tolerance_without_recompiling_and_its_derivative",
    "tests/test_robot_files.py::test_mass_matrix_with_armature_equals_mujoco_qM",
    "tests/test_robot_files.py::test_lilly_path_with_armature_equals_pinocchio",
    "tests/test_tree_properties.py::test_aba_gradients_match_central_differences",
    "tests/test_system_simulation.py::test_fourbar_passive_energy_and_constraint_drift",
    # the largest default-run programs left (2026-11-25, --durations on the loaded machine, 90-117 s each):
    # Lilly & Orin on the quadruped (the Stewart platform, library tips and the singular fallback stay), the
    # system-file quadruped's plots and animation (the four-bar and dual-arm files stay), the 28-DOF biped against
    # Pinocchio (the MJCF dual arm, four-bar and weld loops against Pinocchio stay), an energy module on Lilly's
    # path (the hand-written module type on both paths stays)
    "tests/test_lilly.py::test_quadruped_type1_lilly_path",
    "tests/test_system_files.py::test_simulate_writes_trajectory_plots_and_animation[quadruped]",
    "tests/test_biped.py::test_biped_constrained_acceleration_equals_pinocchio_constraint_dynamics",
    "tests/test_module_interface.py::test_energy_module_on_lilly_path_as_chain_and_as_reference",
    # several design tasks at once: worst case = max and weighted = weighted sum, on the peak measure (48 s in the
    # clean-clone run of 2026-11-26; the same property on the RMS measure stays)
    "tests/test_ckcm_design_tasks.py::test_worst_case_is_the_max_and_weighted_the_weighted_sum_of_the_paths_alone[peak]",
    # 2026-11-26, the default run's slowest design checks (clean-clone --durations): each path's demand against a
    # problem of that path alone on the RMS measure too (the combination of the reported per-path demands stays),
    # the symmetric subspace's optimum against the four-variable one (the four-variable optimum and its independent
    # check stay), the command line's optimise-then-simulate (the command line's several-task optimisation and the
    # plant flying the nominal design open loop, test_ckcm_multibody.py, stay)
    "tests/test_ckcm_design_tasks.py::test_worst_case_is_the_max_and_weighted_the_weighted_sum_of_the_paths_alone[rms]",
    "tests/test_ckcm_design_symmetric.py::test_symmetric_subspace_reproduces_the_four_variable_optimum",
    "tests/test_ckcm_design.py::test_command_line_optimize_then_simulate",
    # the robust objective's gradient and level on the mean (the smooth quantile's, with its implicit gradient,
    # stay); the payload range's hand statics on the multibody model (the paper model's, and the multibody
    # model's level home pose by hand, stay)
    "tests/test_ckcm_design_robust.py::test_robust_objective_gradient_matches_central_differences[mean]",
    "tests/test_ckcm_design_robust.py::test_robust_peak_exceeds_the_nominal_one[mean]",
    "tests/test_ckcm_design_tasks.py::test_payload_range_forces_balance_the_added_payload_weight_by_hand[multibody]",
    # the Panda against Pinocchio (the UR5 from its URDF and the three random trees with every joint type stay);
    # the dual-arm system file's plots and animation (the four-bar's and the Stewart platform's stay)
    "tests/test_tree_vs_pinocchio.py::test_mass_matrix[panda]",
    "tests/test_tree_vs_pinocchio.py::test_rnea_and_nonlinear_effects[panda]",
    "tests/test_tree_vs_pinocchio.py::test_aba_and_inverse_mass_matrix[panda]",
    "tests/test_tree_vs_pinocchio.py::test_frame_jacobians_and_bias_acceleration[panda]",
    "tests/test_tree_vs_pinocchio.py::test_inverse_osim_and_cross_space_inertia[panda]",
    "tests/test_system_files.py::test_simulate_writes_trajectory_plots_and_animation[dual_arm_grasp]",
    # the random tree on a free base against Pinocchio (free bodies against Pinocchio stay in
    # test_system_vs_pinocchio.py, with the UR5 and the other two random trees here)
    "tests/test_tree_vs_pinocchio.py::test_mass_matrix[free_base]",
    "tests/test_tree_vs_pinocchio.py::test_rnea_and_nonlinear_effects[free_base]",
    "tests/test_tree_vs_pinocchio.py::test_aba_and_inverse_mass_matrix[free_base]",
    "tests/test_tree_vs_pinocchio.py::test_frame_jacobians_and_bias_acceleration[free_base]",
    "tests/test_tree_vs_pinocchio.py::test_inverse_osim_and_cross_space_inertia[free_base]",
    # the multibody plant flying a saved non-symmetric design under computed torque (the plant flying the
    # nominal design open loop on its inverse-dynamics forces, to 1e-8, stays: test_ckcm_multibody.py)
    "tests/test_ckcm_design_flight.py::test_plant_applies_the_reported_multibody_forces",
    # 2026-11-27, the default run's slowest programs left (--durations on the loaded machine, 66-231 s each): the
    # full space's gradients (the paper model's four-variable gradients and the full space's variables stay,
    # test_ckcm_design.py / test_ckcm_design_full.py), the robust objective's batch-size schedule (its gradient and
    # level stay, and chunk-size determinism of the Monte Carlo runner, test_montecarlo.py), the legged robot started
    # 1 mm in the floor (the ball started 5 cm in the floor, pushed out without a launch, stays), the ready-made
    # incline file's friction sweep (the cube and the sphere on the incline against Coulomb stay, test_contact_step.py)
    "tests/test_ckcm_design_full.py::test_full_space_gradients_match_central_differences",
    "tests/test_ckcm_design_robust.py::test_batch_size_changes_the_schedule_not_the_numbers[quantile]",
    "tests/test_contact_hardening.py::test_legged_robot_whose_keyframe_puts_its_feet_1mm_into_the_floor_stands_without_a_hop",
    "tests/test_contact_scenes.py::test_box_on_incline_slides_with_coulomb_acceleration_or_sticks",
    # assembly (issue 42): the RCC guideline's insertions on the scene (four 0.6 s insertions, 250 s on the loaded
    # machine; the scene, the RCC controller and Whitney's balances stay: test_assembly_scene.py,
    # test_assembly_controller.py, test_assembly_whitney.py) and the assembly notebook's fast mode
    "tests/test_assembly_rcc.py::test_rcc_at_the_tip_inserts_and_far_behind_it_jams",
    "tests/test_notebooks.py::test_notebook_executes[ckcm_assembly.ipynb-fast]",
}
# Studies: full-size runs that are jobs rather than checks, run with MRDS_SLOW=2 only (the full mode skips them).
# The Monte Carlo notebook at full size draws 10⁵ scenarios, and the design notebook at full size optimises the
# robust full-space design over 256 as-built machines for 200 steps: GPU-sized jobs, each past pytest's 900 s on 2
# CPU cores (2026-11-25/26). Their fast modes (the same code at small sizes) run in the full and default modes.
STUDY_MODE = os.environ.get("MRDS_SLOW", "") == "2"
# The assembly notebook's full mode takes Adam steps through the contact rollouts, whose reverse-mode program took
# 25 min to compile on the loaded 2-core CPU (2026-11-27; the same derivatives are checked in the full mode by
# tests/test_assembly_design.py). The Adam runs now differentiate in forward mode by default (first call 176 s in
# the quick study at load 4-5); the notebook's full mode was not rerun since.
# The other three notebooks' full sizes are the same code as their fast modes (which run in every mode) on larger
# batches: 65-147 s each on the slow 2-core CPU of 2026-12-02, studies too.
STUDY_ONLY = {"tests/test_notebooks.py::test_notebook_executes[ckcm_monte_carlo.ipynb-full]",
              "tests/test_notebooks.py::test_notebook_executes[ckcm_design_optimisation.ipynb-full]",
              "tests/test_notebooks.py::test_notebook_executes[ckcm_assembly.ipynb-full]",
              "tests/test_notebooks.py::test_notebook_executes[contact_monte_carlo.ipynb-full]",
              "tests/test_notebooks.py::test_notebook_executes[flexible_links.ipynb-full]",
              "tests/test_notebooks.py::test_notebook_executes[ckcm_end_effector.ipynb-full]"}
# The heavy checks: full-mode checks that each compile one of the largest programs (60-525 s a check or a file's
# shared programs on the 2-core CPU of 2026-12-02, --durations of the full mode). They are marked ``heavy`` as well
# as ``slow``: MRDS_SLOW=1 runs them with the rest, and .ci/run's full-mode run leaves them out (-m "slow and not
# heavy"), because on a slow 2-core CI machine the default run (32 min) and the whole full mode (about 61 min) did not
# fit CI's 90 minutes together. Run them by hand when what they check changes (docs/checks.md, "The heavy checks"):
# `MRDS_SLOW=1 python -m pytest -q -n 2 --dist loadfile --timeout=900 -m heavy`.
HEAVY_ONLY = {
    # the assembly design's forward- and reverse-mode programs through contact rollouts (one fixture, 525 s)
    "tests/test_assembly_design.py::test_gradient_equals_central_differences_on_a_window_without_a_mode_switch",
    "tests/test_assembly_design.py::test_reverse_mode_equals_forward_mode[free]",
    "tests/test_assembly_design.py::test_reverse_mode_equals_forward_mode[contact]",
    # Menagerie and example-robot-data robots on a floor against MuJoCo (the quadruped and the table stay)
    "tests/test_go1_floor.py::test_go1_stands_from_home_like_mujoco",
    "tests/test_solo12_meshes.py::test_solo12_lies_down_from_standing_like_mujoco",
    "tests/test_humanoid_floor.py::test_humanoid_settles_from_its_squat_like_mujoco",
    # the assembly scene run from its ready-made file with the viewer, and the RCC's insert-or-jam pair
    "tests/test_assembly_scene.py::test_simulate_ready_made_with_viewer",
    "tests/test_assembly_rcc.py::test_rcc_at_the_tip_inserts_and_far_behind_it_jams",
    # the multibody CKCM model's design gradients and its simulated plants (the paper model's stay)
    "tests/test_ckcm_design_tasks.py::test_combined_objective_gradients_match_central_differences[multibody]",
    "tests/test_ckcm_design.py::test_gradients_match_central_differences[multibody]",
    "tests/test_ckcm_design.py::test_simulated_design_applies_the_inverse_dynamics_forces",
    "tests/test_ckcm_design_flight.py::test_plant_applies_the_reported_multibody_forces",
    # the friction grasp's slip derivative in three modes (its forward rollouts stay)
    "tests/test_friction_grasp.py::test_slip_gradient_in_squeeze_force",
}
# --dist loadfile hands whole files to the two workers in this order (heaviest first, by the default run's
# measured time: --durations of 2026-11-27), so that no heavy file starts last and leaves one worker running
# alone; other files follow in collection order.
HEAVY_FIRST = [
    "tests/test_contact_step.py", "tests/test_ckcm_design_robust.py", "tests/test_hard_mechanisms.py",
    "tests/test_joint_couplings.py", "tests/test_ckcm_design_tasks.py", "tests/test_tree_vs_pinocchio.py",
    "tests/test_assembly_whitney.py", "tests/test_collision_convex.py", "tests/test_flexible.py",
    "tests/test_ckcm_multibody.py", "tests/test_robot_files.py", "tests/test_cli.py",
    "tests/test_dense_linalg.py", "tests/test_lilly.py", "tests/test_integration_module.py",
    "tests/test_system_vs_pinocchio.py", "tests/test_mbs_benchmarks.py", "tests/test_contact_outputs.py",
    "tests/test_constraint_space.py", "tests/test_contact_bad_input.py", "tests/test_backend_flags.py",
    "tests/test_collision_narrowphase.py", "tests/test_contact_hardening.py", "tests/test_fuzz_properties.py",
    "tests/test_contact_ncp.py", "tests/test_assembly_controller.py", "tests/test_assembly_scene.py",
    "tests/test_ckcm_design.py", "tests/test_module_contract.py", "tests/test_mjcf_joint_layouts.py",
]


def pytest_configure(config):
    config.pluginmanager.register(crash_retry, "crash_retry")      # a worker dying in native code: tests/crash_retry.py
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False       # xdist would order files by test count; keep HEAVY_FIRST's


def pytest_unconfigure(config):
    if _MADE_CACHE and not hasattr(config, "workerinput"):      # the process that made the run's cache
        shutil.rmtree(os.environ["MRDS_TEST_XLA_CACHE"], ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    ids = {item.nodeid for item in items}
    files = {nid.split("::")[0] for nid in ids}
    stale = sorted(n for n in FULL_MODE_ONLY | STUDY_ONLY | HEAVY_ONLY if n.split("::")[0] in files and n not in ids)
    if stale and not any("::" in str(arg) for arg in config.args):     # whole files were collected
        raise pytest.UsageError(f"tests/conftest.py FULL_MODE_ONLY, STUDY_ONLY or HEAVY_ONLY names tests that do not exist: {stale}")
    rank = {f: i for i, f in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
    skip = pytest.mark.skip(reason="full mode: set MRDS_SLOW=1")
    for item in items:
        if item.nodeid in FULL_MODE_ONLY or item.nodeid in HEAVY_ONLY:
            item.add_marker(pytest.mark.slow)
        if item.nodeid in HEAVY_ONLY:
            item.add_marker(pytest.mark.heavy)
        if not FULL_MODE and item.get_closest_marker("slow") is not None:
            item.add_marker(skip)
        elif item.nodeid in STUDY_ONLY and not STUDY_MODE:
            item.add_marker(pytest.mark.skip(reason="study: set MRDS_SLOW=2 (a full-size job, not a check)"))


def _resident_bytes():
    """This process's resident memory (Linux /proc; 0 where there is none)."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


_release_above = [4 << 30]        # 4 GiB, then 2 GiB above what a release left (freed memory may stay resident)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """After a test file, when this worker holds more than 4 GiB (or 2 GiB more than after the last release), drop
    every compiled program and staged jaxpr (``jax.clear_caches``) and collect.

    A worker runs dozens of files and would otherwise keep every executable it ever compiled: measured in a
    clean-clone run of the README's command, the two workers grew past 6-7 GB each, and in CI a worker died of a
    segmentation fault near the end of the run (2026-11-25; cause not reproduced). Below the bound, files that
    follow one another on a worker keep sharing what they compiled (the design tests do)."""
    yield
    if _resident_bytes() > _release_above[0]:
        jax.clear_caches()
        gc.collect()
        _release_above[0] = max(4 << 30, _resident_bytes() + (2 << 30))


@pytest.fixture
def no_design_dynamics(monkeypatch):
    """The CKCM design's dynamics raises if it is reached: a bad design or task specification must be refused
    before anything compiles (tests/test_ckcm_design_bad_input.py, tests/test_ckcm_design_tasks.py)."""
    from mrds_jax.ckcm.design import objectives

    def compiled(*a, **k):
        raise AssertionError("the dynamics was compiled before the bad input was refused")
    monkeypatch.setattr(objectives, "jitted_forces_and_speeds", compiled)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
