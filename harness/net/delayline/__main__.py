"""`python -m harness.net.delayline ...`: the forwarder process (see forwarder.main)."""

import sys

from harness.net.delayline.forwarder import main

sys.exit(main())
