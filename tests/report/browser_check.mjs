// Opens a tessera --report page in headless Chromium (puppeteer-core) with every non-file request
// blocked and recorded, then checks what a person would see; saves a screenshot.
// Usage: node browser_check.mjs NODE_MODULES KIND PAGE.html SHOT.png CHROMIUM [EXPECTED_NAME...]
//   NODE_MODULES: where `npm ci` put puppeteer-core (the build tree's report/web/node_modules);
//   KIND: segment | wsi | video; EXPECTED_NAME: segment: label names the legend must show; wsi: "heat map"
//   when the page must have one; video: the phase names (every phase shown must be one of them).
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [nodeModules, kind, pagePath, shotPath, chromium, ...names] = process.argv.slice(2);
const puppeteer = createRequire(join(resolve(nodeModules), 'index.js'))('puppeteer-core');
const problems = [];
const fail = (m) => { problems.push(m); };

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  protocolTimeout: 60000,
  // Containers have no user namespaces for the sandbox; software WebGL2 (SwiftShader) for NiiVue.
  args: ['--no-sandbox', '--enable-unsafe-swiftshader', '--use-angle=swiftshader', '--mute-audio'],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 860 });
  await page.setRequestInterception(true);
  page.on('request', (r) => {
    const u = r.url();
    if (u.startsWith('file:') || u.startsWith('data:') || u.startsWith('blob:')) return r.continue();
    fail(`network request: ${u}`);
    r.abort();
  });
  page.on('requestfailed', (r) => { if (r.url().startsWith('file:')) fail(`missing file: ${r.url()}`); });
  page.on('console', (m) => { if (m.type() === 'error') fail(`console error: ${m.text()}`); });
  page.on('pageerror', (e) => fail(`page error: ${e.message}`));
  await page.goto(pathToFileURL(resolve(pagePath)).href, { waitUntil: 'load' });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 90000 });

  // RGBA of the page's pixels in a rectangle (CSS px), decoded from a screenshot inside the page.
  const pixels = async (x, y, w = 3, h = 3) => {
    const png = await page.screenshot({ clip: { x, y, width: w, height: h }, encoding: 'base64' });
    return page.evaluate(async (b64) => {
      const img = new Image();
      img.src = 'data:image/png;base64,' + b64;
      await img.decode();
      const c = document.createElement('canvas');
      c.width = img.width; c.height = img.height;
      const g = c.getContext('2d');
      g.drawImage(img, 0, 0);
      return Array.from(g.getImageData(0, 0, c.width, c.height).data);
    }, png);
  };
  const mean = (px) => {
    const m = [0, 0, 0];
    for (let i = 0; i < px.length; i += 4) for (let k = 0; k < 3; k++) m[k] += px[i + k] / (px.length / 4);
    return m;
  };
  const near = (a, b, tol) => a.every((v, k) => Math.abs(v - b[k]) <= tol);
  const frames = (n) => page.evaluate((k) => new Promise((res) => {
    const step = (i) => (i ? requestAnimationFrame(() => step(i - 1)) : res());
    step(k);
  }), n);
  const text = (sel) => page.$eval(sel, (e) => e.textContent);
  const data = await page.$eval('#tessera-data', (e) => JSON.parse(e.textContent));

  if (kind === 'segment') {
    const legend = await text('#legend');
    for (const n of names) if (!legend.includes(n)) fail(`legend lacks the label name ${n}`);
    const setOpacity = (v) => page.$eval('#opacity', (e, x) => { e.value = String(x); e.dispatchEvent(new Event('input')); }, v);
    const rows = await page.$$('#legend tbody tr');
    let checked = 0;
    for (const [i, l] of data.legend.entries()) {
      if (!l.inside_voxel) continue;
      await rows[i].click();
      await setOpacity(1);
      await frames(3);
      const p = await page.evaluate((k) => window.tesseraReport.axialCanvasPos(k), l.label);
      const box = await page.$eval('#niivue', (e) => { const r = e.getBoundingClientRect(); return { x: r.left, y: r.top }; });
      // The crosshair lines run through the point: sample in the four quadrants just beside it and keep
      // the one nearest the label's colour (a thin label's voxel may sit a few pixels off its drawn centre).
      const dist = (a, b) => Math.max(...a.map((v, k) => Math.abs(v - b[k])));
      let at = null, on = null;
      for (const [sx, sy] of [[2, 2], [-4, 2], [2, -4], [-4, -4]]) {
        const q = [box.x + p.x + sx, box.y + p.y + sy];
        const c = mean(await pixels(q[0], q[1], 2, 2));
        if (!on || dist(c, l.color) < dist(on, l.color)) [at, on] = [q, c];
      }
      await setOpacity(0);
      await frames(3);
      const off = mean(await pixels(at[0], at[1], 2, 2));
      if (!near(on, l.color, 40)) fail(`label ${l.name}: pixel ${on.map(Math.round)} at opacity 1, expected its colour ${l.color}`);
      if (Math.abs(off[0] - off[1]) > 12 || Math.abs(off[1] - off[2]) > 12) fail(`label ${l.name}: not grey at opacity 0: ${off.map(Math.round)}`);
      checked++;
    }
    if (checked === 0) fail('no label to check');
    await setOpacity(0.5);
    await rows[0].click();
    await frames(3);
  } else if (kind === 'wsi') {
    const coords = data.tiles.coords;
    const size = data.tiles.size_level0;
    const [tx, ty] = coords[Math.floor(coords.length / 2)];
    const p = await page.evaluate((x, y) => window.tesseraReport.pagePos(x, y), tx + size / 2, ty + size / 2);
    const setOverlay = async (name, on) => {
      const box = await page.$(`input[data-overlay="${name}"]`);
      if (!box) return fail(`no toggle for the overlay ${name}`);
      if ((await box.evaluate((e) => e.checked)) !== on) await box.click();
      await frames(4);
    };
    for (const o of data.overlays) await setOverlay(o.name, false);
    const slide = mean(await pixels(p.x - 1, p.y - 1));
    if (Math.min(...slide) > 235 || Math.max(...slide) < 20) fail(`no tissue drawn at a kept tile's centre: ${slide.map(Math.round)}`);
    for (const o of data.overlays) {
      await setOverlay(o.name, true);
      // The tile's rectangle with the overlay on and off: what it draws must show.
      const half = Math.max(4, (await page.evaluate((x, y, s) => window.tesseraReport.pagePos(x + s, y).x, tx, ty, size)) -
        (await page.evaluate((x, y) => window.tesseraReport.pagePos(x, y).x, tx, ty)));
      const clip = [Math.round(p.x - half / 2 - 2), Math.round(p.y - half / 2 - 2), Math.round(half + 4), Math.round(half + 4)];
      const withIt = await pixels(...clip);
      await setOverlay(o.name, false);
      const without = await pixels(...clip);
      let diff = 0;
      for (let i = 0; i < withIt.length; i++) diff += Math.abs(withIt[i] - without[i]);
      if (diff / withIt.length < 1) fail(`overlay "${o.name}" draws nothing over a kept tile`);
    }
    if (names.includes('heat map') && !data.heat) fail('no heat map in the report');
    for (const o of data.overlays) await setOverlay(o.name, true);
  } else if (kind === 'video') {
    // The phases the model found, each one of the names it was given.
    const shown = await page.$$eval('#phases tbody tr td:first-child', (tds) => tds.map((t) => t.textContent.trim()));
    if (names.length && !shown.length) fail('no phase table');
    for (const n of shown) if (!names.includes(n)) fail(`phase table shows "${n}", not one of ${names.join(', ')}`);
    const v = await page.$eval('#video', (e) => ({ duration: e.duration, width: e.videoWidth, error: e.error && e.error.code }));
    if (!(v.duration > 0) || !(v.width > 0)) fail(`the browser cannot play the video: ${JSON.stringify(v)}`);
    const tl = await page.$eval('#timeline', (e) => { const r = e.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; });
    for (const f of [0.75, 0.25]) {
      await page.mouse.click(tl.x + f * tl.w, tl.y + tl.h / 2);
      const want = f * v.duration;
      const seekedTo = (t) => { const e = document.getElementById('video'); return !e.seeking && Math.abs(e.currentTime - t) <= 0.25; };
      await page.waitForFunction(seekedTo, { timeout: 30000 }, want).catch(async () => {
        fail(`timeline click at ${f}: currentTime ${await page.$eval('#video', (e) => e.currentTime)}, expected ${want}`);
      });
    }
    const box = await page.$eval('#video', (e) => { const r = e.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; });
    const frame = mean(await pixels(box.x + box.w / 2 - 20, box.y + box.h / 2 - 20, 40, 40));
    if (Math.max(...frame) < 10) fail(`the video frame is black: ${frame.map(Math.round)}`);
  } else {
    fail(`unknown kind ${kind}`);
  }
  await page.screenshot({ path: shotPath });
} catch (e) {
  fail(`${e.message}`);
} finally {
  await browser.close();
}
if (problems.length) {
  for (const p of problems) console.error(`FAILED ${kind}: ${p}`);
  process.exit(1);
}
console.log(`ok ${kind}: ${pagePath}`);
