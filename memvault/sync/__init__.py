"""End-to-end encrypted sync between devices through an rclone remote.

merge.py decides (pure, deterministic), objects.py seals and signs what goes
to the remote, remote.py is the one seam to storage (rclone), state.py is
what a device remembers (sealed in its vault), engine.py runs one sync,
group.py starts and joins groups.
"""
