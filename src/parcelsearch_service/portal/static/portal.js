// Copy buttons for the parcelsearch developer portal (progressive enhancement: every page
// works without this script; it only reveals the buttons and copies the text they name).
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  if (!navigator.clipboard) {
    return;
  }
  var status = document.querySelector(".copy-status");
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var target = document.getElementById(button.getAttribute("data-copy"));
    if (!target) {
      return;
    }
    button.hidden = false;
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(target.textContent.trim()).then(function () {
        button.setAttribute("data-copied", "yes");
        if (status) {
          status.textContent = "Copied to the clipboard.";
        }
      }, function () {
        if (status) {
          status.textContent = "Could not copy: select the text and copy it instead.";
        }
      });
    });
  });
});
