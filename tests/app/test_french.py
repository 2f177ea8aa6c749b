"""French number wording (bsard_demo.app.french): one thousands separator, the narrow no-break space."""
import pytest

from bsard_demo.app import french

NNBSP = "\u202f"


def test_counts_and_decimals_use_one_separator_and_the_comma():
    assert french.integer(22633) == f"22{NNBSP}633" and french.integer(7) == "7"
    assert french.integer(1_234_567) == f"1{NNBSP}234{NNBSP}567"
    assert french.decimal(0.05) == "0,05" and french.decimal(1.56) == "1,56"
    assert french.decimal(0.5123, 3) == "0,512" and french.decimal(12345.678, 1) == f"12{NNBSP}345,7"
    assert french.percent(0.95) == f"95{NNBSP}%" and french.percent(0.1234, 1) == f"12,3{NNBSP}%"
    assert french.megabytes(71_300_000) == "71,3 Mo"


@pytest.mark.parametrize("seconds,text", [(0, "0 s"), (0.2, "1 s"), (59, "59 s"), (60, "1 min"), (61, "2 min"),
                                          (3599, "1 h 00 min"), (3600, "1 h 00 min"), (3661, "1 h 02 min"),
                                          (11316.5, "3 h 09 min")])
def test_duration(seconds, text):
    assert french.duration(seconds) == text


def test_no_app_module_formats_thousands_by_hand():
    """Every count of the pages goes through french.integer: no ``:,`` format nor separator swap elsewhere."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = [*(root / "bsard_demo" / "app").glob("*.py"), *(root / "pages").glob("*.py"), root / "app.py"]
    hand = re.compile(r"""\{[^{}]*:,[^{}]*\}|\.replace\(\s*["'][,.]["']\s*,""")
    offenders = [f"{f.name}:{i}" for f in files if f.name != "french.py"
                 for i, line in enumerate(f.read_text().splitlines(), 1) if hand.search(line)]
    assert offenders == []
