#pragma once
// The CSS and JavaScript every report carries inline. Kept small: the page
// must work with the script off (tables and native tooltips); the script
// adds the readout under line charts and reports its own errors.
namespace gpumem::report::html {

// Forbids every request the page could make: a report never loads anything.
inline constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:";

inline constexpr const char* kStyle = R"CSS(
:root{--fg:#1d2430;--muted:#5b6472;--grid:#e3e6eb;--bg:#fff;--accent:#c0392b}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:var(--fg);background:var(--bg);max-width:1100px;margin:24px auto;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid var(--grid);padding-bottom:4px}
h3{font-size:14px;margin:16px 0 4px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:8px 0}dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}
figure{margin:12px 0}svg.chart{width:100%;height:auto;display:block}
.axis text,.legend text,.marker text,.band text{font-size:11px;fill:var(--muted)}.axis line{stroke:var(--grid)}.axis path{stroke:#9aa3ae;fill:none}
.line{fill:none!important;stroke-width:1.5}.line.dashed{stroke-dasharray:5 4}.area{stroke:none;opacity:.85}.envelope{stroke:none;opacity:.25}
.marker line{stroke:var(--accent);stroke-dasharray:3 3}.marker text{fill:var(--accent)}
.band rect{fill:#f3f5f8}.highlight{fill:#ffd400;opacity:.3}.buffer{stroke:#fff;stroke-width:.4}.buffer:hover{stroke:#000;stroke-width:1}
.readout{font:12px ui-monospace,monospace;color:var(--muted);min-height:1.4em}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0}th,td{padding:2px 10px;border-bottom:1px solid var(--grid);text-align:left}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}caption{text-align:left;color:var(--muted);padding:4px 0}
details{margin:4px 0 12px}summary{cursor:pointer;color:var(--muted)}.note{color:var(--muted);font-size:12.5px}
#gpumem-errors{color:var(--accent);white-space:pre-wrap}
.s0{stroke:#1f77b4;fill:#1f77b4}.s1{stroke:#d62728;fill:#d62728}.s2{stroke:#2ca02c;fill:#2ca02c}.s3{stroke:#ff7f0e;fill:#ff7f0e}
.s4{stroke:#9467bd;fill:#9467bd}.s5{stroke:#8c564b;fill:#8c564b}.s6{stroke:#e377c2;fill:#e377c2}.s7{stroke:#17becf;fill:#17becf}
.c0{fill:#4e79a7}.c1{fill:#f28e2b}.c2{fill:#59a14f}.c3{fill:#e15759}.c4{fill:#76b7b2}.c5{fill:#edc948}.c6{fill:#b07aa1}.c7{fill:#ff9da7}.c8{fill:#9c755f}.c9{fill:#bab0ac}
)CSS";

// In <head>, before anything else runs: errors and blocked requests are
// written into the page, where a test (or a reader) sees them.
inline constexpr const char* kErrorScript = R"JS(
(function(){function report(m){var e=document.getElementById('gpumem-errors');if(e){e.hidden=false;e.textContent+=m+'\n';}else{(window.gpumemEarly=window.gpumemEarly||[]).push(m);}}
window.gpumemReport=report;
window.addEventListener('error',function(ev){report('error: '+ev.message+' at '+ev.lineno+':'+ev.colno);});
document.addEventListener('securitypolicyviolation',function(ev){report('blocked: '+ev.blockedURI+' ('+ev.violatedDirective+')');});})();
)JS";

// At the end of <body>: the readout of line charts (the values of every
// series at the pointer, from the chart's own table), then "ready".
inline constexpr const char* kMainScript = R"JS(
(function(){(window.gpumemEarly||[]).forEach(function(m){window.gpumemReport(m);});
document.querySelectorAll('figure.line-chart').forEach(function(fig){
 var svg=fig.querySelector('svg'),out=fig.querySelector('.readout'),rows=fig.querySelectorAll('tbody tr');
 if(!svg||!out||!rows.length)return;
 var x0=+svg.dataset.x0,x1=+svg.dataset.x1,px0=+svg.dataset.px0,px1=+svg.dataset.px1,head=fig.querySelectorAll('thead th');
 var xs=Array.prototype.map.call(rows,function(r){return +r.dataset.x;});
 svg.addEventListener('mousemove',function(ev){
  var box=svg.getBoundingClientRect(),vb=svg.viewBox.baseVal,px=(ev.clientX-box.left)*vb.width/box.width;
  var x=x0+(px-px0)*(x1-x0)/(px1-px0),lo=0,hi=xs.length-1;
  while(lo<hi){var mid=(lo+hi+1)>>1;if(xs[mid]<=x)lo=mid;else hi=mid-1;}
  var cells=rows[lo].cells,parts=[];
  for(var i=0;i<cells.length;i++)parts.push(head[i].textContent+': '+cells[i].textContent);
  out.textContent=parts.join('   ');});
 svg.addEventListener('mouseleave',function(){out.textContent='';});});
document.documentElement.setAttribute('data-render-ms',String(Math.round(performance.now())));
document.documentElement.setAttribute('data-gpumem-ready','1');})();
)JS";

}  // namespace gpumem::report::html
