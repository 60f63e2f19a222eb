//! The group's settings: its templates (the redundancy and striping a type
//! of file gets) and its attributes (name = value pairs), each kept in one
//! metadata block.
//!
//! Owned by the [`Group`](super::super::Group) (changed only under the
//! group's `&mut`, i.e. under a live group's `meta`). What a block can
//! hold is decided here: a change that would not fit is refused before
//! anything changes, so the commit that encodes the block never meets one
//! (the encoders assert it). Which keys exist and what values they take is
//! the attributes table's (`attributes.rs`); which block a change dirties
//! is the caller's business.

use cairn_format::group::{
    Template, ATTRIBUTES_PER_BLOCK, ATTRIBUTE_NAME_LEN_MAX, ATTRIBUTE_VALUE_LEN_MAX, COPIES_MAX,
    STRIPING_COARSE, STRIPING_FINE, TEMPLATES_PER_BLOCK, TEMPLATE_NAME_LEN_MAX,
};

use super::violations::Violations;

/// Why a setting was not changed: one line saying so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::group) enum Refused {
    /// The block holds no more entries.
    Full(String),
    /// A name or value longer than the block's field.
    TooLong(String),
}

#[derive(Debug, Default)]
pub(in crate::group) struct Settings {
    templates: Vec<Template>,
    attributes: Vec<(String, String)>,
}

impl Settings {
    /// The settings as read at mount (or made by a create). A name the
    /// block holds twice (no Cairn writes one) is kept once, the first,
    /// which is the one every lookup found.
    pub(in crate::group) fn load(
        &mut self,
        mut templates: Vec<Template>,
        mut attributes: Vec<(String, String)>,
    ) {
        let mut seen = std::collections::BTreeSet::new();
        templates.retain(|t| seen.insert(t.name.clone()));
        let mut seen = std::collections::BTreeSet::new();
        attributes.retain(|(k, _)| seen.insert(k.clone()));
        self.templates = templates;
        self.attributes = attributes;
    }

    /// Whether every pair of `pairs` fits the block at once (each pair's
    /// length, and room for every new key together): asked before any of
    /// them is set, so none is set when one would not fit.
    pub(in crate::group) fn attributes_fit(
        &self,
        pairs: &[(String, String)],
    ) -> Result<(), Refused> {
        let mut new = std::collections::BTreeSet::new();
        for (k, v) in pairs {
            self.attribute_fits(k, v)?;
            if self.attribute(k).is_none() {
                new.insert(k.as_str());
            }
        }
        if self.attributes.len() + new.len() > ATTRIBUTES_PER_BLOCK {
            return Err(Refused::Full("the attributes block is full".into()));
        }
        Ok(())
    }

    // -----------------------------------------------------------------------
    // Templates

    pub(in crate::group) fn templates(&self) -> &[Template] {
        &self.templates
    }

    /// Template `name` (names are kept upper case).
    pub(in crate::group) fn template(&self, name: &str) -> Option<&Template> {
        self.templates.iter().find(|t| t.name == name)
    }

    /// Add `template`, whose name no template has.
    pub(in crate::group) fn add_template(&mut self, template: Template) -> Result<(), Refused> {
        if self.templates.len() >= TEMPLATES_PER_BLOCK {
            return Err(Refused::Full(format!(
                "the group has {} templates, the most it keeps",
                self.templates.len()
            )));
        }
        if template.name.is_empty() || template.name.len() > TEMPLATE_NAME_LEN_MAX {
            return Err(Refused::TooLong(format!(
                "template name {:?}: 1 to {TEMPLATE_NAME_LEN_MAX} characters",
                template.name
            )));
        }
        self.templates.push(template);
        Ok(())
    }

    // -----------------------------------------------------------------------
    // Attributes

    /// Every attribute the group keeps, in its block's order.
    pub(in crate::group) fn attributes(&self) -> &[(String, String)] {
        &self.attributes
    }

    /// The value the group keeps for `key` (`None`: the default holds).
    pub(in crate::group) fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether `key` = `value` fits the block (the pair's length, and room
    /// for a new key): what [`Self::set_attribute`] refuses, asked before
    /// any of several pairs is set.
    pub(in crate::group) fn attribute_fits(&self, key: &str, value: &str) -> Result<(), Refused> {
        if key.len() > ATTRIBUTE_NAME_LEN_MAX || value.len() > ATTRIBUTE_VALUE_LEN_MAX {
            return Err(Refused::TooLong(format!(
                "attribute {key}: names are at most {ATTRIBUTE_NAME_LEN_MAX} characters and values at most {ATTRIBUTE_VALUE_LEN_MAX}"
            )));
        }
        if self.attribute(key).is_none() && self.attributes.len() >= ATTRIBUTES_PER_BLOCK {
            return Err(Refused::Full("the attributes block is full".into()));
        }
        Ok(())
    }

    /// Keep `value` for `key`.
    pub(in crate::group) fn set_attribute(
        &mut self,
        key: &str,
        value: String,
    ) -> Result<(), Refused> {
        self.attribute_fits(key, &value)?;
        match self.attributes.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.attributes.push((key.to_string(), value)),
        }
        Ok(())
    }

    /// Keep no value for `key` (its default holds).
    pub(in crate::group) fn clear_attribute(&mut self, key: &str) {
        self.attributes.retain(|(k, _)| k != key);
    }

    // -----------------------------------------------------------------------
    // Invariants

    /// What holds between any two operations: each block holds what it
    /// keeps (no more entries than it has room for, every name and value
    /// within its field), template names are unique, 1 to 30 characters,
    /// with a copy count of 0 (the group's) to 3 and a striping the format
    /// knows, and attribute names are unique.
    pub(in crate::group) fn check_invariants(&self, out: &mut Violations) {
        out.check(self.templates.len() <= TEMPLATES_PER_BLOCK, || {
            format!(
                "{} templates, more than a block holds",
                self.templates.len()
            )
        });
        for (i, t) in self.templates.iter().enumerate() {
            out.check(
                !t.name.is_empty()
                    && t.name.len() <= TEMPLATE_NAME_LEN_MAX
                    && usize::from(t.copies) <= COPIES_MAX
                    && (t.striping == STRIPING_COARSE || t.striping == STRIPING_FINE),
                || format!("template {:?} cannot be written: {t:?}", t.name),
            );
            out.check(
                !self.templates[..i].iter().any(|o| o.name == t.name),
                || format!("template {:?} is kept twice", t.name),
            );
        }
        out.check(self.attributes.len() <= ATTRIBUTES_PER_BLOCK, || {
            format!(
                "{} attributes, more than a block holds",
                self.attributes.len()
            )
        });
        for (i, (k, v)) in self.attributes.iter().enumerate() {
            out.check(
                k.len() <= ATTRIBUTE_NAME_LEN_MAX && v.len() <= ATTRIBUTE_VALUE_LEN_MAX,
                || format!("attribute {k} = {v:?} does not fit its block's fields"),
            );
            out.check(!self.attributes[..i].iter().any(|(o, _)| o == k), || {
                format!("attribute {k} is kept twice")
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broken(s: &Settings) -> Vec<String> {
        let mut v = Violations::default();
        s.check_invariants(&mut v);
        v.lines().to_vec()
    }

    #[test]
    fn a_value_the_block_cannot_hold_is_refused_before_anything_changes() {
        let mut s = Settings::default();
        s.set_attribute("disk_repair_time", "3.6h".into()).unwrap();
        let long = format!("{}1h", "0".repeat(ATTRIBUTE_VALUE_LEN_MAX));
        assert!(matches!(
            s.set_attribute("disk_repair_time", long),
            Err(Refused::TooLong(_))
        ));
        assert_eq!(s.attribute("disk_repair_time"), Some("3.6h"));
        s.set_attribute("disk_repair_time", "12h".into()).unwrap();
        assert_eq!(s.attributes().len(), 1, "set again, not kept twice");
        s.clear_attribute("disk_repair_time");
        assert_eq!(s.attribute("disk_repair_time"), None);
        for i in 0..ATTRIBUTES_PER_BLOCK {
            s.set_attribute(&format!("k{i}"), "v".into()).unwrap();
        }
        assert!(matches!(
            s.set_attribute("one_more", "v".into()),
            Err(Refused::Full(_))
        ));
        s.set_attribute("k0", "w".into()).unwrap();
        assert!(broken(&s).is_empty());
        s.attributes.push(("k1".into(), "x".into()));
        let found = broken(&s);
        assert!(
            found.iter().any(|l| l.contains("more than a block holds")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|l| l.contains("attribute k1 is kept twice")),
            "{found:?}"
        );
    }

    #[test]
    fn pairs_are_refused_together_and_a_name_read_twice_is_kept_once() {
        let mut s = Settings::default();
        let pair = |k: &str| (k.to_string(), "v".to_string());
        for i in 0..ATTRIBUTES_PER_BLOCK - 1 {
            s.set_attribute(&format!("k{i}"), "v".into()).unwrap();
        }
        // Room for one new key, asked for two: neither is set.
        assert!(matches!(
            s.attributes_fit(&[pair("a"), pair("b")]),
            Err(Refused::Full(_))
        ));
        s.attributes_fit(&[pair("a"), pair("k0")]).unwrap();
        s.load(
            Vec::new(),
            vec![pair("x"), ("x".to_string(), "w".to_string()), pair("y")],
        );
        assert_eq!(
            s.attribute("x"),
            Some("v"),
            "the first, as lookups found it"
        );
        assert_eq!(s.attributes().len(), 2);
        assert!(broken(&s).is_empty());
    }

    #[test]
    fn a_template_is_kept_once_and_written_as_the_block_holds_it() {
        let mut s = Settings::default();
        let t = |name: &str| Template {
            name: name.into(),
            copies: 0,
            striping: STRIPING_COARSE,
        };
        s.add_template(t("DEFAULT")).unwrap();
        assert!(matches!(
            s.add_template(t(&"X".repeat(31))),
            Err(Refused::TooLong(_))
        ));
        assert!(s.template("DEFAULT").is_some() && s.template("ONLINELOG").is_none());
        assert!(broken(&s).is_empty());
        s.templates.push(t("DEFAULT"));
        assert!(broken(&s)[0].contains("template \"DEFAULT\" is kept twice"));
    }
}
