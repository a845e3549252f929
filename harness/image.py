"""Moved to harness/backends/docker/image.py (it serves the docker backend). `harness.image` stays
importable as that very module, so code and tests written against the old path (and monkeypatches
of it) keep working."""

import sys

from harness.backends.docker import image as _image

sys.modules[__name__] = _image
