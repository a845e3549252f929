"""An example distro-bench plugin: signSGD with majority vote (signvote.method)."""
