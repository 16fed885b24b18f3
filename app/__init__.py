"""Streamlit web UI: pages gather inputs and show results; every number comes from the packages."""
