"""Dockerfiles built without Docker: a small interpreter of the instructions the project's Dockerfiles use, run
in a throwaway root with the base image's accounts, ownership, working directory and a sticky `/tmp`.

`dockerfile.py` reads a Dockerfile (pure), `accounts.py` resolves USER and `--chown` against the image's own
account files (pure), `bases.py` holds what each base image brings (facts read from its Dockerfile),
`rootfs.py` is the throwaway root and runs processes in it as a user, `python_env.py` plays the base's Python
and the package index, and `build.py` carries the instructions out and runs the finished image's commands.
`tests/test_images.py` drives it; `docs/DEPLOY.md` says what it proves and what it does not.
"""
