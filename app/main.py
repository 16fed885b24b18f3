"""Entry point: ``streamlit run app/main.py`` (or ``make ui``) serves the planner's pages."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # a plain checkout without ``pip install -e .`` still runs
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

VIEWS = Path(__file__).resolve().parent / "views"

st.set_page_config(page_title="LLM serving planner", layout="wide")
pages = [
    st.Page(VIEWS / "plan.py", title="Plan", default=True, url_path="plan"),
    st.Page(VIEWS / "compare.py", title="Compare GPUs", url_path="compare"),
    st.Page(VIEWS / "fleet.py", title="Fleet", url_path="fleet"),
    st.Page(VIEWS / "kernels.py", title="Kernels", url_path="kernels"),
    st.Page(VIEWS / "traffic.py", title="Traffic", url_path="traffic"),
]
st.navigation(pages).run()
