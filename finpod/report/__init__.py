"""Run reports: metrics (empyrical), plots, the pyfolio tear sheet and one self-contained HTML page."""
