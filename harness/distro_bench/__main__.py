from distro_bench.cli import app

app()
