"""C users: `zig build install --prefix P` installs the headers, libcrescent
(static and shared) and lib/pkgconfig/crescent.pc; a small C program builds
against the installed tree with pkg-config, linked to the shared library and,
with `pkg-config --static`, to the archive alone (so Libs.private must name every
library the archive needs), and runs."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ZIG = os.environ.get("ZIG") or shutil.which("zig") or os.path.join(
    ROOT, "node_modules", ".bin", "zig")

PROGRAM = r"""
#include <stdio.h>
#include <crescent/client.h>
#include <crescent/error.h>
#include <crescent/version.h>

int main(void) {
    cr_client *c = NULL;
    char error[256] = "";
    /* ZMQ connects in the background: opening needs no crescentd. */
    int rc = cr_client_open("tcp://127.0.0.1:1", NULL, &c, error, sizeof(error));
    if (rc != CR_OK) {
        fprintf(stderr, "open: %s %s\n", cr_strerror(rc), error);
        return 1;
    }
    cr_client_close(c);
    printf("libcrescent %s ok\n", CRESCENT_VERSION);
    return 0;
}
"""


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    if not os.access(ZIG, os.X_OK) or shutil.which("pkg-config") is None or \
            shutil.which("gcc") is None:
        pytest.skip("needs zig, pkg-config and gcc")
    p = tmp_path_factory.mktemp("prefix")
    r = subprocess.run([ZIG, "build", "install", "--prefix", str(p)], cwd=ROOT,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    return p


def pkg_config(prefix, *args):
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    r = subprocess.run(["pkg-config", *args, "crescent"], capture_output=True, text=True,
                       env=env, check=True)
    return r.stdout.split()


def test_installed_tree(prefix):
    for path in ("include/crescent/client.h", "include/crescent/error.h",
                 "include/crescent/version.h", "lib/libcrescent.a", "lib/libcrescent.so",
                 "lib/pkgconfig/crescent.pc"):
        assert (prefix / path).exists(), path
    assert f"prefix={prefix}" in (prefix / "lib/pkgconfig/crescent.pc").read_text()


def test_program_links_shared(prefix, tmp_path):
    src = tmp_path / "p.c"
    src.write_text(PROGRAM)
    exe = tmp_path / "p"
    subprocess.run(["gcc", "-std=c17", "-Wall", "-Werror", str(src), "-o", str(exe),
                    *pkg_config(prefix, "--cflags", "--libs"),
                    f"-Wl,-rpath,{prefix / 'lib'}"], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr
    ldd = subprocess.run(["ldd", str(exe)], capture_output=True, text=True).stdout
    assert str(prefix / "lib" / "libcrescent.so") in ldd


def test_program_links_the_archive_with_its_private_libs(prefix, tmp_path):
    src = tmp_path / "p.c"
    src.write_text(PROGRAM)
    exe = tmp_path / "p-static"
    archive = str(prefix / "lib" / "libcrescent.a")
    # -lcrescent would pick the .so: name the archive, keep every other flag
    libs = [archive if f == "-lcrescent" else f for f in pkg_config(prefix, "--static", "--libs")]
    assert archive in libs
    subprocess.run(["gcc", "-std=c17", "-Wall", "-Werror", str(src), "-o", str(exe),
                    *pkg_config(prefix, "--cflags"), *libs], check=True)
    ldd = subprocess.run(["ldd", str(exe)], capture_output=True, text=True).stdout
    assert "libcrescent" not in ldd
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr
