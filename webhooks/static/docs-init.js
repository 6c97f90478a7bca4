// Starts Swagger UI on /docs. A file, not an inline script, so the page's Content-Security-Policy
// allows scripts from the service only; the page gives the settings in data-config.
window.addEventListener("load", function () {
  var container = document.getElementById("swagger-ui-container");
  var config = JSON.parse(container.getAttribute("data-config"));
  config.dom_id = "#swagger-ui-container";
  window.ui = SwaggerUIBundle(config);
});
