// MathJax 3 configuration for pymdownx.arithmatex (generic mode), as mkdocs-material documents it; the MathJax
// file itself is served from this site (docs/_hooks.py copies it from the django-static-mathjax package).
window.MathJax = {
  tex: {inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]], processEscapes: true, processEnvironments: true},
  options: {ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex"},
  svg: {fontCache: "global"}
};
