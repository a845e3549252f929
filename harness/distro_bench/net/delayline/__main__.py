"""`python -m distro_bench.net.delayline ...`: the forwarder process (see forwarder.main)."""

import sys

from distro_bench.net.delayline.forwarder import main

sys.exit(main())
