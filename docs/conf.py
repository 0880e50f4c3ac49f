"""Sphinx configuration of the kpca-dask documentation.

Pages are MyST Markdown; the API reference is generated recursively from the
docstrings (autosummary + numpydoc), the command-line reference from
``kpca_dask.cli.build_parser()`` (``_ext/cli_reference.py``), and the notebooks
in ``../notebooks`` are rendered with their stored outputs, never executed.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import kpca_dask  # noqa: E402

project = "kpca-dask"
author = "kpca-dask developers"
copyright = "kpca-dask developers"
release = kpca_dask.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_nb",
    "sphinx_copybutton",
    "cli_reference",
]

# Pages are MyST (.md), notebooks .ipynb (both through MyST-NB), and the generated API
# pages reStructuredText (autosummary writes them with the first suffix). Notebooks show the
# outputs stored in them: executing them needs MNIST, a cluster and minutes.
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
nb_execution_mode = "off"
# dollarmath/amsmath: the notebooks write their formulas in LaTeX ($...$).
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath", "amsmath"]
myst_heading_anchors = 3
# Notebooks use heading levels for emphasis (an H3 right under the title); that
# renders fine and is no reason to fail the build.
suppress_warnings = ["myst.header"]

exclude_patterns = [
    "_build",
    "**.ipynb_checkpoints",
    "**/*.zarr",
    "notebooks/*.md",  # the notebooks folder is linked in; only notebooks are pages
]
templates_path = ["_templates"]

# API reference: one page per module, found recursively, its functions and classes on it
# (the package's and kpca_dask.io's on pages of their own: _templates/autosummary). The pages
# of a previous build are removed first: a module moved or renamed since must not leave
# a page behind that fails to import.
shutil.rmtree(Path(__file__).parent / "generated", ignore_errors=True)
autosummary_generate = True
autosummary_ignore_module_all = False  # kpca_dask's page lists its __all__
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"  # the numpydoc Parameters sections give the types
numpydoc_show_class_members = False  # the class template lists the methods
numpydoc_class_members_toctree = False

# Math: the pages of this site and the docstrings write their formulas in Unicode
# text, so they read the same offline. Only the notebooks' LaTeX goes to MathJax,
# which Sphinx loads from its CDN: typeset on a published site, shown as TeX
# source where the CDN cannot be reached. (imgmath would typeset offline but
# needs a LaTeX installation for every build.)

# No intersphinx: fetching the inventories of numpy, dask, ... needs the network,
# and the build must pass offline with warnings as errors.

html_theme = "pydata_sphinx_theme"
html_title = f"kpca-dask {release}"
html_static_path = ["_static"]
html_css_files = ["kpca-dask.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    "secondary_sidebar_items": ["page-toc"],
    "navbar_persistent": [],
    "navbar_end": ["search-button", "theme-switcher"],
    "header_links_before_dropdown": 7,
    # The sidebar shows the current section's pages only, not every API page under every
    # page: a fifth less build time (about 200 generated pages), and a shorter sidebar.
    "collapse_navigation": True,
}
# Pages without sub-pages get the full width instead of an empty section menu.
html_sidebars = {page: [] for page in
                 ("index", "getting-started", "cli", "benchmarks", "architecture")}
html_show_sourcelink = False


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Leave out methods scikit-learn attaches to estimators (``set_fit_request``, ...).

    They are documented by scikit-learn, and their docstrings refer to its glossary.
    """
    if getattr(obj, "__module__", "") and obj.__module__.startswith("sklearn."):
        return True
    return None


def _module_sections_as_rubrics(app, what, name, obj, options, lines):
    """Render the numpydoc sections of a module docstring (``Examples``) as rubrics.

    numpydoc formats the docstrings of classes and functions but not of modules, where
    a heading underlined with dashes would open a section that swallows the tables of
    functions and classes that follow it on the page.
    """
    if what != "module":
        return
    for i in range(len(lines) - 1):
        title, underline = lines[i].strip(), lines[i + 1].strip()
        if title and len(underline) >= len(title) and set(underline) == {"-"}:
            lines[i], lines[i + 1] = f".. rubric:: {title}", ""


def _numpydoc_with_its_template_compiled_once():
    """numpydoc (1.11) compiles its docstring template again for each of the ~3000
    docstrings it formats, a new Jinja environment each time: a fifth of the build. The
    same function with the template compiled once per builder (numpydoc's ``setup`` takes a
    replacement ``get_doc_object`` for this; Sphinx calls it without one)."""
    import numpydoc.numpydoc
    from jinja2 import FileSystemLoader
    from jinja2.sandbox import SandboxedEnvironment
    from numpydoc import docscrape_sphinx
    from sphinx.jinja2glue import BuiltinTemplateLoader

    folder = str(Path(docscrape_sphinx.__file__).parent / "templates")
    templates = {}

    def get_doc_object(obj, what=None, doc=None, config=None, builder=None):
        if id(builder) not in templates:  # as numpydoc makes it, with or without a builder
            if builder is None:
                loader = FileSystemLoader([folder])
            else:
                loader = BuiltinTemplateLoader()
                loader.init(builder, dirs=[folder])
            environment = SandboxedEnvironment(loader=loader)
            templates[id(builder)] = environment.get_template("numpydoc_docstring.rst")
        config = {} if config is None else config
        config["template"] = templates[id(builder)]
        return docscrape_sphinx.get_doc_object_orig(
            obj, what=what, doc=doc, config=config, class_doc=docscrape_sphinx.SphinxClassDoc,
            func_doc=docscrape_sphinx.SphinxFunctionDoc, obj_doc=docscrape_sphinx.SphinxObjDoc)

    numpydoc.numpydoc.get_doc_object = get_doc_object


def setup(app):
    _numpydoc_with_its_template_compiled_once()
    app.connect("autodoc-skip-member", _skip_foreign_members)
    app.connect("autodoc-process-docstring", _module_sections_as_rubrics)
