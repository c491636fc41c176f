"""Helpers shared by the tests of the command line (test_cli.py, test_split.py, ...)."""
from rfstream import cli


def run(argv):
    """``rfstream.cli.main`` in process; argparse errors exit via SystemExit (their code)."""
    try:
        return cli.main([str(a) for a in argv])
    except SystemExit as exc:
        return exc.code


def one_error_line(capsys):
    """The one line a failed command printed on stderr: no traceback, no usage block."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]
