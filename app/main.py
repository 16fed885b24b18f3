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
# less empty space above the page so the answer sits above the fold at 1280 x 800
st.markdown(
    "<style>.block-container{padding-top:3.5rem;padding-bottom:2rem}"
    '[data-testid="stMetricValue"]{font-size:1.9rem}</style>',
    unsafe_allow_html=True,
)
# the default page is served at "/"; a hidden twin serves the same script at "/plan" so that
# a deep link to the Plan page works too
pages = [
    st.Page(VIEWS / "plan.py", title="Plan", default=True, url_path="home"),
    st.Page(VIEWS / "plan.py", title="Plan", url_path="plan", visibility="hidden"),
    st.Page(VIEWS / "compare.py", title="Compare GPUs", url_path="compare"),
    st.Page(VIEWS / "fleet.py", title="Fleet", url_path="fleet"),
    st.Page(VIEWS / "kernels.py", title="Kernels", url_path="kernels"),
    st.Page(VIEWS / "traffic.py", title="Traffic", url_path="traffic"),
]
st.navigation(pages, position="top").run()
