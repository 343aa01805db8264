/* Streams and events made on one device: the set-up most runtime tests
 * share (test_rt_device.c, and the timed device's in
 * test_rt_alloc_replay.c).  Header only, so any test_rt_*.c may include it,
 * after support/agtest.h. */
#ifndef AG_TEST_RT_DEV_FIX_H
#define AG_TEST_RT_DEV_FIX_H

#include "aliasguard/device.h"

enum { RT_HANDLES_MAX = 3 };

/* Streams s[0..ns) and events e[0..ne) of dev; a slot past them, or one
 * the test destroyed itself, is NULL. */
typedef struct rt_handles {
    ag_device *dev;
    ag_dev_stream *s[RT_HANDLES_MAX];
    ag_dev_event *e[RT_HANDLES_MAX];
} rt_handles;

/* Makes the streams first, in index order (the simulated device numbers
 * them so: stream k has id k on a fresh device), then the events;
 * asserts each.  dev is borrowed. */
static inline void handles_open(rt_handles *h, ag_device *dev, uint32_t ns, uint32_t ne)
{
    assert_true(ns <= RT_HANDLES_MAX && ne <= RT_HANDLES_MAX);
    memset(h, 0, sizeof *h);
    h->dev = dev;
    for (uint32_t k = 0; k < ns; k++)
        assert_int_equal(ag_dev_stream_create(dev, &h->s[k]), AG_OK);
    for (uint32_t k = 0; k < ne; k++)
        assert_int_equal(ag_dev_event_create(dev, &h->e[k]), AG_OK);
}

/* Destroy stream or event k at the test's own point; close skips it. */
static inline void handles_drop_stream(rt_handles *h, uint32_t k)
{
    ag_dev_stream_destroy(h->dev, h->s[k]);
    h->s[k] = NULL;
}

static inline void handles_drop_event(rt_handles *h, uint32_t k)
{
    ag_dev_event_destroy(h->dev, h->e[k]);
    h->e[k] = NULL;
}

/* Destroys the events, then the streams (draining them), each in index
 * order; the device stays. */
static inline void handles_close(rt_handles *h)
{
    for (uint32_t k = 0; k < RT_HANDLES_MAX; k++)
        if (h->e[k])
            ag_dev_event_destroy(h->dev, h->e[k]);
    for (uint32_t k = 0; k < RT_HANDLES_MAX; k++)
        if (h->s[k])
            ag_dev_stream_destroy(h->dev, h->s[k]);
}

#endif
